#include "util/atomic_file.hpp"

#include <fcntl.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include <k3/error.hpp>
#include <k3/temporaries.hpp>
#include <k3/user_files.hpp>

namespace k3 {

namespace fs = std::filesystem;

namespace {

// The registry of live temporaries. A signal handler reads it, so it is a fixed array
// (no allocation) whose slots change hands only by compare-and-swap on `state`:
//   free → busy (a writer claims it and copies its path) → live (visible to the handler)
//   live → busy → free (the writer releases it)
//   live → claimed (remove_live_temporaries takes it, unlinks the path; the process ends)
// A slot's path is written only by the one writer that moved it from free to busy, and read
// only by a thread that saw it live, so the handler never reads a path being rewritten.
enum SlotState : int { kFree = 0, kBusy = 1, kLive = 2, kClaimed = 3 };
constexpr int kSlots = 64;
struct Slot {
  std::atomic<int> state{kFree};
  char path[PATH_MAX] = {};
};
static_assert(std::atomic<int>::is_always_lock_free, "the registry is read from a signal handler");
constinit Slot g_slots[kSlots];

}  // namespace

LiveTemporary::LiveTemporary(const fs::path& path) noexcept {
  const std::string& name = path.native();
  if (name.size() >= PATH_MAX) return;
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (!g_slots[i].state.compare_exchange_strong(expected, kBusy, std::memory_order_acquire)) continue;
    std::memcpy(g_slots[i].path, name.c_str(), name.size() + 1);
    g_slots[i].state.store(kLive, std::memory_order_release);
    slot_ = i;
    return;
  }
}

void LiveTemporary::release() noexcept {
  if (slot_ < 0) return;
  int expected = kLive;
  // A slot the handler claimed stays claimed: the process is ending.
  if (g_slots[slot_].state.compare_exchange_strong(expected, kBusy, std::memory_order_acquire))
    g_slots[slot_].state.store(kFree, std::memory_order_release);
  slot_ = -1;
}

int live_temporary_count() noexcept {
  int n = 0;
  for (const Slot& s : g_slots) n += s.state.load(std::memory_order_acquire) == kLive ? 1 : 0;
  return n;
}

void remove_live_temporaries() noexcept {
  for (Slot& s : g_slots) {
    int expected = kLive;
    if (s.state.compare_exchange_strong(expected, kClaimed, std::memory_order_acquire)) (void)::unlink(s.path);
  }
}

fs::path atomic_temp_path(const fs::path& target) {
  return fs::path(target.string() + ".tmp." + std::to_string(::getpid()));
}

void write_all(int fd, const void* data, std::size_t size, const std::string& name) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    // write() returning 0 for a non-zero size is not progress; report it rather than spin.
    if (n <= 0) throw RuntimeError(name + ": write failed: " + std::strerror(n < 0 ? errno : EIO));
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

void pwrite_all(int fd, const void* data, std::size_t size, std::uint64_t offset, const std::string& name) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw RuntimeError(name + ": write failed at offset " + std::to_string(offset) + ": " +
                         std::strerror(n < 0 ? errno : EIO));
    p += n;
    size -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
}

void sync_directory(const fs::path& dir) {
  const OwnedFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) throw RuntimeError(dir.string() + ": cannot open to sync: " + std::strerror(errno));
  if (::fsync(fd.get()) != 0) throw RuntimeError(dir.string() + ": cannot sync: " + std::strerror(errno));
}

AtomicFile::AtomicFile(fs::path target) : target_(std::move(target)), temp_(atomic_temp_path(target_)), live_(temp_) {
  // A link, a device, a FIFO or a folder at the target would be replaced by the rename.
  check_output_file(target_, {});
  fd_.reset(::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd_) fail("cannot create");
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  fd_.reset();
  ::unlink(temp_.c_str());  // may already be gone (a failed commit removed it)
}

void AtomicFile::fail(const std::string& what) const {
  throw RuntimeError(temp_.string() + ": " + what + ": " + std::strerror(errno));
}

void AtomicFile::write(const void* data, std::size_t size) {
  if (!fd_) throw RuntimeError(target_.string() + ": written after commit()");
  write_all(fd_.get(), data, size, temp_.string());
}

void AtomicFile::pwrite(const void* data, std::size_t size, std::uint64_t offset) {
  if (!fd_) throw RuntimeError(target_.string() + ": written after commit()");
  pwrite_all(fd_.get(), data, size, offset, temp_.string());
}

void AtomicFile::resize(std::uint64_t size) {
  if (!fd_) throw RuntimeError(target_.string() + ": resized after commit()");
  if (::ftruncate(fd_.get(), static_cast<off_t>(size)) != 0) fail("cannot set the size to " + std::to_string(size));
}

void AtomicFile::commit() {
  if (!fd_) throw RuntimeError(target_.string() + ": committed twice");
  if (::fsync(fd_.get()) != 0) fail("cannot flush");
  if (const int err = fd_.close(); err != 0) {
    errno = err;
    fail("cannot close");
  }
  // Checked again right before the rename: what took the target's place while the file was
  // written (a link, a FIFO) is not replaced either.
  check_output_file(target_, {});
  if (::rename(temp_.c_str(), target_.c_str()) != 0)
    throw RuntimeError(target_.string() + ": cannot rename the temporary file into place: " + std::strerror(errno));
  live_.release();
  committed_ = true;
  sync_directory(target_.has_parent_path() ? target_.parent_path() : fs::path("."));
}

void write_file_atomically(const fs::path& file, const void* data, std::size_t size) {
  check_output_file(file, {});  // before any folder is made for it
  if (file.has_parent_path()) {
    std::error_code ec;  // a folder that cannot be made shows up as "cannot create" below
    fs::create_directories(file.parent_path(), ec);
  }
  AtomicFile f(file);
  f.write(data, size);
  f.commit();
}

void append_record(const fs::path& file, std::string_view record) {
  check_output_file(file, {});  // before any folder is made for it
  if (file.has_parent_path()) {
    std::error_code ec;  // a folder that cannot be made shows up as "cannot append" below
    fs::create_directories(file.parent_path(), ec);
  }
  // O_NOFOLLOW and the fstat below: a link or a FIFO put there since is refused, not followed
  // or waited on; O_RDWR to read the last byte.
  const OwnedFd fd(::open(file.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644));
  if (!fd) throw RuntimeError(file.string() + ": cannot append: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw RuntimeError(file.string() + ": cannot append: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw UsageError(file.string() + ": " + std::string(file_type_name(st.st_mode)) +
                     ", not a regular file to append to");
  // A last line without its end of line (written by hand, or a record whose '\n' a crash
  // cut off) keeps its own line: the record starts on the next one. The last byte is read
  // under an exclusive lock that other appenders take too (released when fd closes), so it
  // is never the middle of a record being written.
  if (::flock(fd.get(), LOCK_EX) != 0)
    throw RuntimeError(file.string() + ": cannot append: cannot lock: " + std::strerror(errno));
  if (::fstat(fd.get(), &st) != 0) throw RuntimeError(file.string() + ": cannot append: " + std::strerror(errno));
  char last = '\n';
  if (st.st_size > 0 && ::pread(fd.get(), &last, 1, st.st_size - 1) != 1)
    throw RuntimeError(file.string() + ": cannot append: cannot read its last byte: " + std::strerror(errno));
  const std::string line = last == '\n' ? std::string(record) : "\n" + std::string(record);
  // One write(2): only a full disk or a signal makes it short, and then the rest follows.
  write_all(fd.get(), line.data(), line.size(), file.string());
  if (::fdatasync(fd.get()) != 0) throw RuntimeError(file.string() + ": cannot append: " + std::strerror(errno));
}

}  // namespace k3
