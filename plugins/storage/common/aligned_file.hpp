// What the two aligned readers (direct, uring) share: opening a local file with O_DIRECT or
// through the page cache, and the steps of a read that do not depend on how the windows
// are then read (a pool of pread threads, or io_uring): checking a request, splitting it
// into windows (segments.hpp), noticing the end of the file, copying out of a bounce
// buffer and naming what went wrong.
#pragma once
#include <fcntl.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <k3/host.hpp>
#include <k3/status.hpp>
#include <k3/storage.hpp>

#include "local_file.hpp"
#include "segments.hpp"

namespace k3::storage::local {

/// O_DIRECT needs offsets, lengths and buffers aligned to the logical block size; 4 KiB
/// covers every device (512 B and 4 KiB sectors).
inline constexpr std::uint64_t kDirectAlignment = 4096;
/// Bytes per O_DIRECT read of a request that is not aligned: one bounce buffer's size.
inline constexpr std::uint64_t kBounceWindow = std::uint64_t{1} << 20;

/// A local file opened for an aligned reader.
struct AlignedOpen {
  UniqueFd fd;
  std::uint64_t size = 0;
  bool direct = false;  ///< opened with O_DIRECT (else through the page cache)
};

/// Opens `path` for the aligned reader `who` ("storage/direct"), with O_DIRECT when
/// `direct`. A filesystem that refuses O_DIRECT (EINVAL at open) is `unsupported`, the
/// message ending in `remedy`, unless `fallback`: then the file is opened through the page
/// cache, with a warning. Logs the opened file at debug level.
inline sdk::Status open_aligned(const std::string& path, bool direct, bool fallback, std::string_view remedy,
                                sdk::HostServices* host, const char* who, AlignedOpen& out) {
  int open_errno = 0;
  out.direct = direct;
  sdk::Status st = open_local(path, direct ? O_DIRECT : 0, out.fd, out.size, open_errno);
  if (!st.ok() && direct && open_errno == EINVAL) {
    if (!fallback)
      return sdk::Status::error(sdk::StatusCode::unsupported,
                                path + ": the filesystem refuses O_DIRECT (EINVAL at open); " + std::string(remedy));
    if (host != nullptr)
      host->log(sdk::LogLevel::warn, who,
                path + ": the filesystem refuses O_DIRECT; reading through the page cache (fallback=buffered)");
    out.direct = false;
    st = open_local(path, 0, out.fd, out.size, open_errno);
  }
  if (!st.ok()) return st;
  if (host != nullptr)
    host->log(sdk::LogLevel::debug, who,
              "opened " + path + " (" + std::to_string(out.size) + " bytes, " + (out.direct ? "O_DIRECT" : "buffered") +
                  ")");
  return sdk::Status::success();
}

/// A file of an aligned reader: what it was opened as, and the steps of a read shared by
/// both readers. The reader adds read(), which issues the windows.
class AlignedFile : public sdk::StorageFile {
 public:
  AlignedFile(std::string path, AlignedOpen opened)
      : path_(std::move(path)), fd_(std::move(opened.fd)), size_(opened.size), direct_(opened.direct) {}

  [[nodiscard]] std::uint64_t size() const noexcept override { return size_; }
  [[nodiscard]] std::uint32_t alignment() const noexcept override {
    return direct_ ? static_cast<std::uint32_t>(kDirectAlignment) : 1;
  }

 protected:
  /// Checks request `index` of a batch (no destination, a range past the end: its failure)
  /// and appends its segments: aligned windows of kBounceWindow with O_DIRECT, else plain
  /// reads of at most `buffered_chunk` bytes. A request of length 0 has none.
  sdk::Status plan(std::size_t index, const sdk::ReadRequest& request, std::uint64_t buffered_chunk,
                   std::vector<Segment>& out) const {
    if (request.length == 0) return sdk::Status::success();
    if (request.dest == nullptr) return no_destination(path_, request.offset);
    if (sdk::Status st = check_inside(path_, size_, request.offset, request.length); !st.ok()) return st;
    plan_segments(index, request.offset, request.length, request.dest, direct_ ? kDirectAlignment : 1,
                  direct_ ? kBounceWindow : buffered_chunk, out);
    return sdk::Status::success();
  }

  /// A bounce buffer for one window.
  static AlignedBuffer bounce_buffer() { return aligned_buffer(kBounceWindow, kDirectAlignment); }

  /// Whether a read that has brought `done` bytes of a window, the last call `n` of them,
  /// has met the end of the file: nothing more came, or (O_DIRECT) a count that is not
  /// aligned, which the kernel returns only at the end.
  [[nodiscard]] bool at_end(std::uint64_t n, std::uint64_t done) const noexcept {
    return n == 0 || (direct_ && done % kDirectAlignment != 0);
  }

  /// The bytes of `request` there were, when the file ended `done` bytes into the window
  /// of `seg` (truncated after open): for short_read's "got".
  static std::uint64_t got_before_end(const Segment& seg, const sdk::ReadRequest& request, std::uint64_t done) {
    const std::uint64_t before = seg.bounce ? seg.file_offset + seg.copy_from : seg.file_offset;
    const std::uint64_t reached = seg.file_offset + done;
    return (reached > before ? reached : before) - request.offset;
  }

  /// A bounced window's wanted bytes, from `buffer` to the request's destination.
  static void copy_out(const Segment& seg, const std::byte* buffer) {
    std::memcpy(seg.dest, buffer + seg.copy_from, seg.copy_length);
  }

  /// "<path>: read error at offset N: <errno text>".
  [[nodiscard]] sdk::Status read_error(std::uint64_t offset, int err) const {
    return sdk::Status::error(sdk::StatusCode::io_error,
                              path_ + ": read error at offset " + std::to_string(offset) + ": " + errno_text(err));
  }

  std::string path_;
  UniqueFd fd_;
  std::uint64_t size_;
  bool direct_;
};

/// The backend of an aligned reader: lists folders as every local backend does and opens
/// files with open_aligned; the reader makes its file with make_file().
class AlignedBackend : public sdk::StorageBackend {
 public:
  /// `who` names the reader in the log; `remedy` ends the refusal of O_DIRECT.
  AlignedBackend(sdk::HostServices* host, const char* who, bool direct, bool fallback, std::string_view remedy)
      : host_(host), who_(who), direct_(direct), fallback_(fallback), remedy_(remedy) {}

  sdk::Status list(std::string_view uri, std::vector<std::string>& names) noexcept override {
    return list_local(uri, names);
  }

  sdk::Status open(std::string_view uri, std::unique_ptr<sdk::StorageFile>& out) noexcept override {
    try {
      const std::string path(uri);
      AlignedOpen opened;
      if (sdk::Status st = open_aligned(path, direct_, fallback_, remedy_, host_, who_, opened); !st.ok()) return st;
      out = make_file(path, std::move(opened));
      return sdk::Status::success();
    } catch (const std::exception& e) {
      return sdk::Status::error(sdk::StatusCode::out_of_memory, std::string(uri) + ": " + e.what());
    }
  }

 protected:
  virtual std::unique_ptr<sdk::StorageFile> make_file(std::string path, AlignedOpen opened) = 0;

 private:
  sdk::HostServices* host_;
  const char* who_;
  bool direct_;
  bool fallback_;
  std::string remedy_;
};

}  // namespace k3::storage::local
