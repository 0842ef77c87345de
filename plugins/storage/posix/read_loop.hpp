// The pread loop of the posix backend, apart from the file so tests can drive it with a
// scripted pread (EINTR, partial reads, errors at a chosen offset) as well as a real one.
//
// read_fully() reads exactly `length` bytes at `offset`:
//   - EINTR: the call is retried;
//   - a partial read (fewer bytes than asked, > 0): the loop continues where it stopped;
//   - 0 bytes before the request is complete (end of file, or a file truncated after
//     open): short_read, "<path>: short read at offset N: got X of Y bytes";
//   - any other error: io_error, "<path>: read error at offset N: <errno text>", N being
//     the offset the failing call started at.
// A request that starts past the largest off_t cannot lie in any file: short_read, 0 bytes.
#pragma once
#include <sys/types.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>

#include <k3/status.hpp>

namespace k3::storage::posix {

/// Bytes asked of one pread: bounded so offset arithmetic stays far from off_t overflow
/// (Linux caps a single read at about 2 GiB anyway; the loop continues after it).
inline constexpr std::uint64_t kMaxReadChunk = std::uint64_t{1} << 30;

inline std::string errno_text(int err) { return std::system_category().message(err); }

/// `pread_fn(fd, buf, count, offset)` behaves like pread(2): bytes read, or -1 with errno.
template <class PreadFn>
sdk::Status read_fully(PreadFn&& pread_fn, int fd, std::string_view path, std::uint64_t offset, std::uint64_t length,
                       std::byte* dest) {
  constexpr auto kMaxOffset = static_cast<std::uint64_t>(std::numeric_limits<off_t>::max());
  auto short_read = [&](std::uint64_t got) {
    return sdk::Status::error(sdk::StatusCode::short_read, std::string(path) + ": short read at offset " +
                                                               std::to_string(offset) + ": got " + std::to_string(got) +
                                                               " of " + std::to_string(length) + " bytes");
  };
  std::uint64_t done = 0;
  while (done < length) {
    const std::uint64_t position = offset + done;
    if (position < offset || position > kMaxOffset - kMaxReadChunk) return short_read(done);
    const std::uint64_t want = length - done < kMaxReadChunk ? length - done : kMaxReadChunk;
    const ssize_t got = pread_fn(fd, dest + done, static_cast<std::size_t>(want), static_cast<off_t>(position));
    if (got < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      return sdk::Status::error(sdk::StatusCode::io_error, std::string(path) + ": read error at offset " +
                                                               std::to_string(position) + ": " + errno_text(err));
    }
    if (got == 0) return short_read(done);
    done += static_cast<std::uint64_t>(got);
  }
  return sdk::Status::success();
}

}  // namespace k3::storage::posix
