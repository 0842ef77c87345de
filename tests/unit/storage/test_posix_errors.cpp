// Storage `posix` through the plugin host: every failure has its code and exact message.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <limits>

#include "storage_support.hpp"

using k3::sdk::StatusCode;

namespace {
std::string short_detail(const std::string& path, std::uint64_t offset, std::uint64_t got, std::uint64_t want) {
  return path + ": short read at offset " + std::to_string(offset) + ": got " + std::to_string(got) + " of " +
         std::to_string(want) + " bytes";
}
}  // namespace

TEST_CASE("a missing file is not_found naming the path", "[storage][posix][errors]") {
  k3test::TempDir dir;
  const auto backend = k3test::posix_backend();
  for (const auto& path : {dir.path() / "absent.safetensors", dir.path() / "no-dir" / "absent.bin"}) {
    std::unique_ptr<k3::sdk::StorageFile> file;
    const k3::sdk::Status st = backend->open(path.string(), file);
    CHECK(st.code == StatusCode::not_found);
    CHECK(st.detail == path.string() + ": no such file");
    CHECK_FALSE(file);
  }
}

TEST_CASE("a directory or an empty path is refused at open", "[storage][posix][errors]") {
  k3test::TempDir dir;
  const auto backend = k3test::posix_backend();
  std::unique_ptr<k3::sdk::StorageFile> file;
  k3::sdk::Status st = backend->open(dir.path().string(), file);
  CHECK(st.code == StatusCode::invalid_argument);
  CHECK(st.detail == dir.path().string() + ": is a directory");
  st = backend->open("", file);
  CHECK(st.code == StatusCode::invalid_argument);
  CHECK_FALSE(file);
}

TEST_CASE("a path that cannot be opened is io_error with the errno text (symlink loop)", "[storage][posix][errors]") {
  // Runs as any user, root included: the kernel refuses a symlink cycle with ELOOP.
  k3test::TempDir dir;
  const auto a = dir.path() / "loop-a", b = dir.path() / "loop-b";
  std::filesystem::create_symlink(b, a);
  std::filesystem::create_symlink(a, b);
  std::unique_ptr<k3::sdk::StorageFile> file;
  const k3::sdk::Status st = k3test::posix_backend()->open(a.string(), file);
  CHECK(st.code == StatusCode::io_error);
  CHECK(st.detail == a.string() + ": cannot open: " + std::strerror(ELOOP));
  CHECK_FALSE(file);
}

TEST_CASE("an unreadable file is io_error with the errno text", "[storage][posix][errors]") {
  if (::geteuid() == 0) {
    WARN("SKIP unreadable-file test: running as root, which reads files whatever their mode");
    return;
  }
  k3test::TempDir dir;
  const auto path = dir.path() / "secret.bin";
  k3test::write_file(path, k3test::random_bytes(10, 5));
  std::filesystem::permissions(path, std::filesystem::perms::none);
  std::unique_ptr<k3::sdk::StorageFile> file;
  const k3::sdk::Status st = k3test::posix_backend()->open(path.string(), file);
  CHECK(st.code == StatusCode::io_error);
  CHECK(st.detail == path.string() + ": cannot open: " + std::strerror(EACCES));
}

TEST_CASE("reads past the end of the file are short_read with offset and byte counts", "[storage][posix][errors]") {
  k3test::TempDir dir;
  const auto data = k3test::random_bytes(1000, 6);
  const auto path = dir.path() / "short.bin";
  k3test::write_file(path, data);
  const auto file = k3test::open_file(*k3test::posix_backend(), path.string());
  const std::string p = path.string();

  SECTION("straddling the end: the bytes that exist are delivered") {
    std::vector<k3test::OwnedRequest> batch;
    batch.emplace_back(990, 20);
    const k3::sdk::Status st = k3test::read_batch(*file, batch);
    CHECK(st.code == StatusCode::short_read);
    CHECK(st.detail == short_detail(p, 990, 10, 20));
    CHECK(batch[0].request.result == StatusCode::short_read);
    CHECK(std::memcmp(batch[0].buffer.data(), data.data() + 990, 10) == 0);
  }
  SECTION("starting at or past the end") {
    for (std::uint64_t off : {std::uint64_t{1000}, std::uint64_t{5000}, std::numeric_limits<std::uint64_t>::max(),
                              std::uint64_t{std::numeric_limits<std::int64_t>::max()}}) {
      std::vector<k3test::OwnedRequest> batch;
      batch.emplace_back(off, 4);
      const k3::sdk::Status st = k3test::read_batch(*file, batch);
      CHECK(st.code == StatusCode::short_read);
      CHECK(st.detail == short_detail(p, off, 0, 4));
    }
  }
  SECTION("one bad request fails only itself; the batch returns the first failure") {
    std::vector<k3test::OwnedRequest> batch;
    batch.emplace_back(0, 100);
    batch.emplace_back(2000, 8);  // first failure
    batch.emplace_back(500, 100);
    batch.emplace_back(999, 2);  // second failure
    const k3::sdk::Status st = k3test::read_batch(*file, batch);
    CHECK(st.code == StatusCode::short_read);
    CHECK(st.detail == short_detail(p, 2000, 0, 8));
    CHECK(batch[0].request.result == StatusCode::ok);
    CHECK(batch[1].request.result == StatusCode::short_read);
    CHECK(batch[2].request.result == StatusCode::ok);
    CHECK(batch[3].request.result == StatusCode::short_read);
    CHECK(std::memcmp(batch[0].buffer.data(), data.data(), 100) == 0);
    CHECK(std::memcmp(batch[2].buffer.data(), data.data() + 500, 100) == 0);
  }
}

TEST_CASE("a file truncated after open gives short_read, not stale bytes", "[storage][posix][errors]") {
  k3test::TempDir dir;
  const auto data = k3test::random_bytes(8192, 7);
  const auto path = dir.path() / "shrinking.bin";
  k3test::write_file(path, data);
  const auto file = k3test::open_file(*k3test::posix_backend(), path.string());
  CHECK(file->size() == 8192);  // known at open
  std::filesystem::resize_file(path, 3000);
  std::vector<k3test::OwnedRequest> batch;
  batch.emplace_back(2000, 4096);
  const k3::sdk::Status st = k3test::read_batch(*file, batch);
  CHECK(st.code == StatusCode::short_read);
  CHECK(st.detail == short_detail(path.string(), 2000, 1000, 4096));
  CHECK(std::memcmp(batch[0].buffer.data(), data.data() + 2000, 1000) == 0);
}

TEST_CASE("a request with no destination is invalid_argument", "[storage][posix][errors]") {
  k3test::TempDir dir;
  const auto path = dir.path() / "x.bin";
  k3test::write_file(path, k3test::random_bytes(64, 8));
  const auto file = k3test::open_file(*k3test::posix_backend(), path.string());
  std::vector<k3::sdk::ReadRequest> batch = {{16, 8, nullptr, StatusCode::ok}};
  const k3::sdk::Status st = file->read(batch);
  CHECK(st.code == StatusCode::invalid_argument);
  CHECK(st.detail == path.string() + ": read at offset 16 has no destination buffer");
  CHECK(batch[0].result == StatusCode::invalid_argument);
}

TEST_CASE("a device error is io_error with the errno text and offset (/proc/self/mem)", "[storage][posix][errors]") {
  // /proc/self/mem is a regular file whose offsets are this process's addresses; reading
  // address 0, which is never mapped, fails with EIO in the kernel: a real errno path.
  const std::string path = "/proc/self/mem";
  std::unique_ptr<k3::sdk::StorageFile> file;
  const k3::sdk::Status opened = k3test::posix_backend()->open(path, file);
  if (!opened.ok()) {
    WARN("SKIP EIO test: cannot open /proc/self/mem here (" << opened.detail << ")");
    return;
  }
  std::vector<k3test::OwnedRequest> batch;
  batch.emplace_back(0, 64);
  const k3::sdk::Status st = k3test::read_batch(*file, batch);
  CHECK(st.code == StatusCode::io_error);
  CHECK(st.detail == path + ": read error at offset 0: " + std::strerror(EIO));
  CHECK(batch[0].request.result == StatusCode::io_error);
}
