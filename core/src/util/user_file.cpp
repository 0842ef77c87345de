// The checks on files a user names (k3/user_files.hpp): inputs are regular files under a
// cap, outputs are absent or regular files outside the run's checkpoint folders. One place,
// so that every reader and writer refuses the same things with the same words.
#include <k3/user_files.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include <k3/error.hpp>
#include <k3/units.hpp>

#include "util/owned_fd.hpp"

namespace k3 {

namespace fs = std::filesystem;

namespace {

std::string prefix(std::string_view what, const fs::path& file) {
  return (what.empty() ? std::string() : std::string(what) + ": ") + file.string() + ": ";
}

/// The refusal of an input whose stat is `st`, or "" when it may be read.
std::string input_problem(const struct stat& st, std::string_view noun, std::uint64_t max_bytes) {
  if (!S_ISREG(st.st_mode)) return std::string(file_type_name(st.st_mode)) + ", not a " + std::string(noun);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes)
    return std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) + " (" +
           format_bytes(max_bytes) + ") a " + std::string(noun) + " may hold";
  return {};
}

/// `inner` is `outer` or below it (both already canonical).
bool within(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin();
  for (auto it = outer.begin(); it != outer.end(); ++it, ++i) {
    if (it->empty() && std::next(it) == outer.end()) break;  // a trailing separator
    if (i == inner.end() || *i != *it) return false;
  }
  return true;
}

}  // namespace

std::string_view file_type_name(unsigned int mode) noexcept {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::uint64_t check_input_file(const fs::path& file, std::string_view what, std::string_view noun,
                               std::uint64_t max_bytes) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0)
    throw UsageError(prefix(what, file) + (errno == ENOENT ? std::string("no such file")
                                                           : std::string("cannot be read: ") + std::strerror(errno)));
  if (const std::string problem = input_problem(st, noun, max_bytes); !problem.empty())
    throw UsageError(prefix(what, file) + problem);
  return static_cast<std::uint64_t>(st.st_size);
}

std::string read_user_file(const fs::path& file, std::string_view what, std::string_view noun,
                           std::uint64_t max_bytes) {
  // stat first, so that a device is refused without being opened (opening some has effects).
  (void)check_input_file(file, what, noun, max_bytes);
  // O_NONBLOCK: should a FIFO have taken the file's place since, the open returns at once.
  const OwnedFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) throw UsageError(prefix(what, file) + "cannot be read: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw RuntimeError(prefix(what, file) + "cannot be read: " + std::strerror(errno));
  if (const std::string problem = input_problem(st, noun, max_bytes); !problem.empty())
    throw UsageError(prefix(what, file) + problem);
  std::string out(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t have = 0;
  for (;;) {
    if (have == out.size()) {
      if (out.size() > max_bytes) break;  // grown past the cap while read: refused below
      out.resize(std::min<std::uint64_t>(max_bytes + 1, out.size() + (1u << 16)));
      if (have == out.size()) break;
    }
    const ssize_t n = ::read(fd.get(), out.data() + have, out.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw RuntimeError(prefix(what, file) + "read error: " + std::strerror(errno));
    if (n == 0) break;
    have += static_cast<std::size_t>(n);
  }
  if (have > max_bytes)
    throw UsageError(prefix(what, file) + "grew past " + format_bytes(max_bytes) + " while it was read; a " +
                     std::string(noun) + " may hold at most that");
  out.resize(have);
  return out;
}

void check_output_file(const fs::path& file, std::string_view what, std::span<const fs::path> keep_out) {
  struct stat st {};
  if (::lstat(file.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      throw UsageError(prefix(what, file) + std::string(file_type_name(st.st_mode)) +
                       ", not a regular file: k3host writes a new file and renames it over the old one, which "
                       "would replace " +
                       (S_ISLNK(st.st_mode) ? "the link itself" : "it") + "; name a regular file or a new one");
  } else if (errno != ENOENT) {
    throw UsageError(prefix(what, file) + "cannot be written: " + std::strerror(errno));
  }
  if (keep_out.empty()) return;
  std::error_code ec;
  const fs::path target = fs::weakly_canonical(fs::absolute(file, ec), ec);
  if (ec) return;  // nothing on the path can be resolved, so nothing of a checkpoint is there
  for (const fs::path& dir : keep_out) {
    if (dir.empty()) continue;
    const fs::path folder = fs::weakly_canonical(fs::absolute(dir, ec), ec);
    if (ec) continue;
    if (within(target, folder))
      throw UsageError(prefix(what, file) + "inside the checkpoint folder " + dir.string() +
                       ", which k3host only reads; write it elsewhere");
  }
}

}  // namespace k3
