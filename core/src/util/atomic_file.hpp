// Files we write appear whole or not at all. A writer writes "<file>.tmp.<pid>", fsyncs it,
// renames it over <file> and fsyncs the folder, so a reader (or a crash) sees either the
// old file or the complete new one. A writer that is destroyed before commit() (an
// exception, a failed check) removes its temporary file. Every failure is a RuntimeError
// naming the file and the system's reason. A target that is there but is not a regular file
// (a symbolic link, a device, a FIFO, a folder) is refused with a UsageError before anything
// is written, and again right before the rename (k3/user_files.hpp, check_output_file). While a writer has not
// committed, its temporary's name is registered (LiveTemporary), so that a process exiting at once (k3/temporaries.hpp:
// a second Ctrl-C) can unlink it from a signal handler.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "util/owned_fd.hpp"

namespace k3 {

/// "<target>.tmp.<pid>": recognisable next to the target, unique per process.
[[nodiscard]] std::filesystem::path atomic_temp_path(const std::filesystem::path& target);

/// Writes all `size` bytes at the file position (short writes and EINTR retried).
/// Throws RuntimeError "<name>: write failed: <reason>".
void write_all(int fd, const void* data, std::size_t size, const std::string& name);
/// The same at `offset`, leaving the file position alone.
/// Throws RuntimeError "<name>: write failed at offset N: <reason>".
void pwrite_all(int fd, const void* data, std::size_t size, std::uint64_t offset, const std::string& name);

/// fsyncs a folder, so the entries just created or renamed in it survive a crash.
/// Throws RuntimeError "<dir>: cannot open to sync: ..." or "<dir>: cannot sync: ...".
void sync_directory(const std::filesystem::path& dir);

/// Registers one temporary path for as long as it lives, in a fixed table that
/// remove_live_temporaries() (k3/temporaries.hpp) reads from a signal handler. Register
/// before the file is created and release once it is renamed or unlinked: then the
/// handler's unlink() can only meet the temporary or nothing. A path longer than PATH_MAX
/// (no file could be created under it) or a full table leaves it unregistered. Thread-safe.
class LiveTemporary {
 public:
  explicit LiveTemporary(const std::filesystem::path& path) noexcept;
  ~LiveTemporary() { release(); }
  LiveTemporary(const LiveTemporary&) = delete;
  LiveTemporary& operator=(const LiveTemporary&) = delete;

  /// The temporary no longer exists under its name: forget it (idempotent).
  void release() noexcept;
  /// False when the table was full or the path too long.
  [[nodiscard]] bool registered() const noexcept { return slot_ >= 0; }

 private:
  int slot_ = -1;
};

/// Temporaries registered right now (tests).
[[nodiscard]] int live_temporary_count() noexcept;

/// A file written in pieces (large files, files whose header is patched at the end) that
/// replaces its target only on commit().
class AtomicFile {
 public:
  /// Creates the temporary file (replacing a stale one of the same name); the target's
  /// folder must exist. Throws UsageError when the target is there and is not a regular
  /// file, RuntimeError "<temp>: cannot create: <reason>".
  explicit AtomicFile(std::filesystem::path target);
  /// Not committed: closes and removes the temporary file. The target is untouched.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  /// Appends at the file position.
  void write(const void* data, std::size_t size);
  void write(std::string_view text) { write(text.data(), text.size()); }
  /// Writes at `offset` (a header patched once the body is known).
  void pwrite(const void* data, std::size_t size, std::uint64_t offset);
  /// Sets the file's size; growing it leaves a hole (no disk blocks).
  void resize(std::uint64_t size);

  /// fsync, close, rename over the target, fsync the folder. After a failure the target is
  /// untouched (or, if only the folder's fsync failed, already replaced) and the temporary
  /// file is gone. Calling it twice is an error.
  void commit();

  [[nodiscard]] bool committed() const noexcept { return committed_; }
  [[nodiscard]] const std::filesystem::path& target() const noexcept { return target_; }
  [[nodiscard]] const std::filesystem::path& temp_path() const noexcept { return temp_; }
  /// The open temporary file (for reads of what was written, e.g. verification).
  [[nodiscard]] int fd() const noexcept { return fd_.get(); }

 private:
  [[noreturn]] void fail(const std::string& what) const;
  std::filesystem::path target_;
  std::filesystem::path temp_;
  LiveTemporary live_;  // registered before fd_ creates the file, released after it is gone
  OwnedFd fd_;
  bool committed_ = false;
};

/// Writes a whole file through AtomicFile, creating the folders the path names
/// (e.g. --out runs/today/report.json).
void write_file_atomically(const std::filesystem::path& file, const void* data, std::size_t size);
inline void write_file_atomically(const std::filesystem::path& file, std::string_view text) {
  write_file_atomically(file, text.data(), text.size());
}

/// Appends one whole record (a line of a log such as chat history, ending in '\n') to
/// `file`, creating it and its folders when missing: one write(2) on an O_APPEND
/// descriptor, then fdatasync. Rewriting the whole file by temp+rename for every record
/// would cost its size each time; an O_APPEND write lands at the end as one piece (other
/// appenders never split it), so a crash can leave at most a torn last record, which the
/// file's reader must detect. When the file does not end with '\n' (a last record whose end
/// of line is missing), the record starts with one, so it never joins that line. A target
/// that is not a regular file (a link, a device, a FIFO) is a UsageError; other failures
/// are a RuntimeError "<file>: cannot append: <reason>".
void append_record(const std::filesystem::path& file, std::string_view record);

}  // namespace k3
