// The posix backend's pread loop, driven by a scripted pread: EINTR, partial reads and
// errors cannot be produced on demand with a real local file, so each scripted step
// stands in for one pread(2) call.
#include <catch2/catch.hpp>

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>

#include "../../../plugins/storage/posix/read_loop.hpp"
#include "storage_support.hpp"

using k3::sdk::StatusCode;

namespace {

/// One scripted pread result: `bytes` > 0 copies that many file bytes (at most what was
/// asked), 0 is end of file, and a negative value fails with errno = -bytes.
struct Step {
  long bytes;
};

struct ScriptedPread {
  const std::vector<std::byte>* file;
  std::deque<Step> script;
  std::vector<std::pair<std::size_t, off_t>> calls;  // (count, offset) of every call

  ssize_t operator()(int, void* buf, std::size_t count, off_t offset) {
    calls.emplace_back(count, offset);
    REQUIRE_FALSE(script.empty());
    const Step step = script.front();
    script.pop_front();
    if (step.bytes < 0) {
      errno = static_cast<int>(-step.bytes);
      return -1;
    }
    const std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(step.bytes), count);
    std::memcpy(buf, file->data() + offset, n);
    return static_cast<ssize_t>(n);
  }
};

k3::sdk::Status run(ScriptedPread& pread, std::uint64_t offset, std::uint64_t length, std::vector<std::byte>& dest) {
  dest.assign(length, std::byte{0});
  return k3::storage::posix::read_fully(std::ref(pread), 3, "model.bin", offset, length, dest.data());
}

}  // namespace

TEST_CASE("read loop retries EINTR and continues partial reads", "[storage][read-loop]") {
  const auto file = k3test::random_bytes(1000, 9);
  ScriptedPread pread{&file, {{-EINTR}, {3}, {-EINTR}, {-EINTR}, {1}, {96}}, {}};
  std::vector<std::byte> dest;
  REQUIRE(run(pread, 100, 100, dest).ok());
  CHECK(std::memcmp(dest.data(), file.data() + 100, 100) == 0);
  // Each call asks for the rest, from where the previous one stopped.
  const std::vector<std::pair<std::size_t, off_t>> expected = {{100, 100}, {100, 100}, {97, 103},
                                                               {97, 103},  {97, 103},  {96, 104}};
  CHECK(pread.calls == expected);
}

TEST_CASE("read loop reports end of file as short_read with the bytes it got", "[storage][read-loop]") {
  const auto file = k3test::random_bytes(1000, 10);
  ScriptedPread pread{&file, {{10}, {-EINTR}, {5}, {0}}, {}};
  std::vector<std::byte> dest;
  const k3::sdk::Status st = run(pread, 40, 50, dest);
  CHECK(st.code == StatusCode::short_read);
  CHECK(st.detail == "model.bin: short read at offset 40: got 15 of 50 bytes");
  CHECK(std::memcmp(dest.data(), file.data() + 40, 15) == 0);
}

TEST_CASE("read loop reports an error with the offset of the failing call", "[storage][read-loop]") {
  const auto file = k3test::random_bytes(1000, 11);
  ScriptedPread pread{&file, {{20}, {-EIO}}, {}};
  std::vector<std::byte> dest;
  const k3::sdk::Status st = run(pread, 100, 64, dest);
  CHECK(st.code == StatusCode::io_error);
  CHECK(st.detail == std::string("model.bin: read error at offset 120: ") + std::strerror(EIO));
  CHECK(pread.script.empty());  // no retry after a real error
}

TEST_CASE("read loop asks at most kMaxReadChunk bytes per call", "[storage][read-loop]") {
  // No buffer of that size is needed: the scripted pread fails the first call, after
  // recording how much it was asked for.
  const auto file = k3test::random_bytes(16, 12);
  ScriptedPread pread{&file, {{-EIO}}, {}};
  std::byte one{};
  const std::uint64_t huge = std::uint64_t{5} << 30;
  const k3::sdk::Status st = k3::storage::posix::read_fully(std::ref(pread), 3, "big.bin", 0, huge, &one);
  CHECK(st.code == StatusCode::io_error);
  REQUIRE(pread.calls.size() == 1);
  CHECK(pread.calls[0].first == k3::storage::posix::kMaxReadChunk);
}

TEST_CASE("read loop with a real pread on a real file", "[storage][read-loop]") {
  k3test::TempDir dir;
  const auto data = k3test::random_bytes(5000, 13);
  const auto path = dir.path() / "real.bin";
  k3test::write_file(path, data);
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  std::vector<std::byte> dest(4000);
  CHECK(k3::storage::posix::read_fully(::pread, fd, "real.bin", 1000, 4000, dest.data()).ok());
  CHECK(std::memcmp(dest.data(), data.data() + 1000, 4000) == 0);
  const k3::sdk::Status st = k3::storage::posix::read_fully(::pread, fd, "real.bin", 4500, 4000, dest.data());
  CHECK(st.detail == "real.bin: short read at offset 4500: got 500 of 4000 bytes");
  ::close(fd);
}
