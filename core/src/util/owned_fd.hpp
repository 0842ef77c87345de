// A POSIX file descriptor with one owner: closed when the owner goes, moved never copied.
// close() exists for writers, whose close can report a late write error (NFS, quotas);
// the destructor closes silently because it cannot report anything.
#pragma once
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace k3 {

class OwnedFd {
 public:
  OwnedFd() noexcept = default;
  /// Takes ownership of `fd` (a negative value means none, as open() returns on failure).
  explicit OwnedFd(int fd) noexcept : fd_(fd < 0 ? -1 : fd) {}
  ~OwnedFd() { reset(); }

  OwnedFd(OwnedFd&& other) noexcept : fd_(other.release()) {}
  OwnedFd& operator=(OwnedFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }

  /// Gives the descriptor up without closing it.
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }

  /// Closes the current descriptor (errors ignored) and takes `fd` instead.
  void reset(int fd = -1) noexcept {
    const int old = std::exchange(fd_, fd < 0 ? -1 : fd);
    if (old >= 0) ::close(old);
  }

  /// Closes now; returns 0, or the errno of a failed close (the descriptor is gone either
  /// way: retrying close() on Linux could close someone else's descriptor).
  [[nodiscard]] int close() noexcept {
    const int fd = release();
    if (fd < 0) return 0;
    return ::close(fd) == 0 ? 0 : errno;
  }

 private:
  int fd_ = -1;
};

}  // namespace k3
