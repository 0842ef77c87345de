// Shared by the local storage backends (posix, direct, uring, mmap): a move-only descriptor,
// opening a path with the same checks and messages as the posix backend, listing a folder,
// errno text, and the messages every backend uses for short reads.
#pragma once
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <k3/status.hpp>

namespace k3::storage::local {

inline std::string errno_text(int err) { return std::system_category().message(err); }

/// Owns a file descriptor (move-only).
class UniqueFd {
 public:
  UniqueFd() noexcept = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  ~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  [[nodiscard]] int get() const noexcept { return fd_; }

 private:
  int fd_ = -1;
};

/// "<path>: short read at offset N: got X of Y bytes" (N = request offset).
inline sdk::Status short_read(const std::string& path, std::uint64_t offset, std::uint64_t got, std::uint64_t length) {
  return sdk::Status::error(sdk::StatusCode::short_read, path + ": short read at offset " + std::to_string(offset) +
                                                             ": got " + std::to_string(got) + " of " +
                                                             std::to_string(length) + " bytes");
}

inline sdk::Status no_destination(const std::string& path, std::uint64_t offset) {
  return sdk::Status::error(sdk::StatusCode::invalid_argument,
                            path + ": read at offset " + std::to_string(offset) + " has no destination buffer");
}

/// A request that reaches past `size` (known at open): the short_read status, else ok.
inline sdk::Status check_inside(const std::string& path, std::uint64_t size, std::uint64_t offset,
                                std::uint64_t length) {
  if (offset <= size && length <= size - offset) return sdk::Status::success();
  return short_read(path, offset, offset < size ? size - offset : 0, length);
}

/// Opens `path` read-only with `extra_flags`, sized once: regular files and block devices.
/// `open_errno` receives the errno of a failed open(2) (0 otherwise) so a caller can tell
/// EINVAL from O_DIRECT apart from the rest.
inline sdk::Status open_local(const std::string& path, int extra_flags, UniqueFd& fd, std::uint64_t& size,
                              int& open_errno) {
  open_errno = 0;
  if (path.empty()) return sdk::Status::error(sdk::StatusCode::invalid_argument, "storage: empty path");
  UniqueFd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC | extra_flags));
  if (f.get() < 0) {
    open_errno = errno;
    if (open_errno == ENOENT || open_errno == ENOTDIR)
      return sdk::Status::error(sdk::StatusCode::not_found, path + ": no such file");
    return sdk::Status::error(sdk::StatusCode::io_error, path + ": cannot open: " + errno_text(open_errno));
  }
  struct stat st {};
  if (::fstat(f.get(), &st) != 0)
    return sdk::Status::error(sdk::StatusCode::io_error, path + ": cannot stat: " + errno_text(errno));
  if (S_ISREG(st.st_mode)) {
    size = static_cast<std::uint64_t>(st.st_size);
  } else if (S_ISBLK(st.st_mode)) {
    const off_t end = ::lseek(f.get(), 0, SEEK_END);
    if (end < 0)
      return sdk::Status::error(sdk::StatusCode::io_error, path + ": cannot size block device: " + errno_text(errno));
    size = static_cast<std::uint64_t>(end);
  } else {
    return sdk::Status::error(sdk::StatusCode::invalid_argument,
                              path +
                                  (S_ISDIR(st.st_mode) ? ": is a directory" : ": not a regular file or block device"));
  }
  fd = std::move(f);
  return sdk::Status::success();
}

/// The regular files (symbolic links followed) directly inside the folder `path`.
inline sdk::Status list_local_folder(const std::string& path, std::vector<std::string>& names) {
  names.clear();
  if (path.empty()) return sdk::Status::error(sdk::StatusCode::invalid_argument, "storage: empty path");
  const std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(path.c_str()), ::closedir);
  if (!dir) {
    const int err = errno;
    if (err == ENOENT) return sdk::Status::error(sdk::StatusCode::not_found, path + ": no such folder");
    if (err == ENOTDIR) return sdk::Status::error(sdk::StatusCode::not_found, path + ": not a folder");
    return sdk::Status::error(sdk::StatusCode::io_error, path + ": cannot list the folder: " + errno_text(err));
  }
  const int dfd = ::dirfd(dir.get());
  for (;;) {
    errno = 0;
    const dirent* e = ::readdir(dir.get());
    if (e == nullptr) break;
    const std::string_view name(e->d_name);
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(dfd, e->d_name, &st, 0) == 0 && S_ISREG(st.st_mode)) names.emplace_back(name);
  }
  if (errno != 0)
    return sdk::Status::error(sdk::StatusCode::io_error, path + ": cannot list the folder: " + errno_text(errno));
  return sdk::Status::success();
}

/// StorageBackend::list of every local backend: list_local_folder, with an allocation
/// failure reported as a status (list is noexcept across the plugin boundary).
inline sdk::Status list_local(std::string_view uri, std::vector<std::string>& names) noexcept {
  try {
    return list_local_folder(std::string(uri), names);
  } catch (const std::exception& e) {
    return sdk::Status::error(sdk::StatusCode::out_of_memory, std::string(uri) + ": " + e.what());
  }
}

}  // namespace k3::storage::local
