// Storage `posix`: opens a local path and reads batches with buffered pread(2), through
// the page cache. pread takes its own offset, so one descriptor serves every host thread
// at once without locks. alignment() is 1: buffered reads have no alignment needs.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <k3/plugin.hpp>

#include "common/batch_outcome.hpp"
#include "common/local_file.hpp"

#include "read_loop.hpp"

namespace {

using k3::sdk::Status;
using k3::sdk::StatusCode;

/// Owns a file descriptor (move-only).
class UniqueFd {
 public:
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  ~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&&) = delete;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  [[nodiscard]] int get() const noexcept { return fd_; }

 private:
  int fd_;
};

class PosixFile final : public k3::sdk::StorageFile {
 public:
  PosixFile(std::string path, UniqueFd fd, std::uint64_t size)
      : path_(std::move(path)), fd_(std::move(fd)), size_(size) {}

  [[nodiscard]] std::uint64_t size() const noexcept override { return size_; }
  [[nodiscard]] std::uint32_t alignment() const noexcept override { return 1; }

  Status read(std::span<k3::sdk::ReadRequest> batch) noexcept override {
    try {
      return k3::storage::local::read_each(batch, [&](const k3::sdk::ReadRequest& r) { return read_one(r); });
    } catch (const std::exception& e) {  // only std::bad_alloc while formatting a message
      return Status::error(StatusCode::out_of_memory, path_ + ": " + e.what());
    }
  }

 private:
  Status read_one(const k3::sdk::ReadRequest& request) const {
    if (request.length == 0) return Status::success();
    if (request.dest == nullptr)
      return Status::error(StatusCode::invalid_argument,
                           path_ + ": read at offset " + std::to_string(request.offset) + " has no destination buffer");
    return k3::storage::posix::read_fully(::pread, fd_.get(), path_, request.offset, request.length, request.dest);
  }

  std::string path_;
  UniqueFd fd_;
  std::uint64_t size_;
};

class PosixBackend final : public k3::sdk::StorageBackend {
 public:
  explicit PosixBackend(k3::sdk::HostServices* host) : host_(host) {}

  Status list(std::string_view uri, std::vector<std::string>& names) noexcept override {
    return k3::storage::local::list_local(uri, names);
  }

  Status open(std::string_view uri, std::unique_ptr<k3::sdk::StorageFile>& out) noexcept override {
    try {
      return open_path(std::string(uri), out);
    } catch (const std::exception& e) {
      return Status::error(StatusCode::out_of_memory, std::string(uri) + ": " + e.what());
    }
  }

 private:
  Status open_path(const std::string& path, std::unique_ptr<k3::sdk::StorageFile>& out) {
    if (path.empty()) return Status::error(StatusCode::invalid_argument, "posix storage: empty path");
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) {
      const int err = errno;
      if (err == ENOENT || err == ENOTDIR) return Status::error(StatusCode::not_found, path + ": no such file");
      return Status::error(StatusCode::io_error, path + ": cannot open: " + k3::storage::posix::errno_text(err));
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0)
      return Status::error(StatusCode::io_error, path + ": cannot stat: " + k3::storage::posix::errno_text(errno));
    std::uint64_t size = 0;
    if (S_ISREG(st.st_mode)) {
      size = static_cast<std::uint64_t>(st.st_size);
    } else if (S_ISBLK(st.st_mode)) {
      const off_t end = ::lseek(fd.get(), 0, SEEK_END);
      if (end < 0)
        return Status::error(StatusCode::io_error,
                             path + ": cannot size block device: " + k3::storage::posix::errno_text(errno));
      size = static_cast<std::uint64_t>(end);
    } else {
      return Status::error(StatusCode::invalid_argument,
                           path + (S_ISDIR(st.st_mode) ? ": is a directory" : ": not a regular file or block device"));
    }
    if (host_ != nullptr)
      host_->log(k3::sdk::LogLevel::debug, "storage/posix", "opened " + path + " (" + std::to_string(size) + " bytes)");
    out = std::make_unique<PosixFile>(path, std::move(fd), size);
    return Status::success();
  }

  k3::sdk::HostServices* host_;
};

}  // namespace

namespace k3::storage::posix {

sdk::Status create(const sdk::CreateArgs& args, std::unique_ptr<sdk::StorageBackend>& out,
                   std::vector<std::string>& unknown_params) {
  const sdk::ParamReader params(args.params, {});  // the backend takes no parameters
  unknown_params = params.unused();
  out = std::make_unique<PosixBackend>(args.host);
  return sdk::Status::success();
}

}  // namespace k3::storage::posix

K3_PLUGIN(storage, "posix", "1.0.0", k3::storage::posix::create, nullptr)
K3_PLUGIN_NO_PARAMS()
