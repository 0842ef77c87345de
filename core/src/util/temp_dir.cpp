#include "util/temp_dir.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <system_error>

#include <k3/error.hpp>

#include "util/atomic_file.hpp"

namespace k3 {
namespace fs = std::filesystem;
namespace {

std::string prefix_of(const fs::path& target) { return "." + target.filename().string() + ".k3tmp."; }

/// True when `pid` names no live process (kill(pid, 0) reports ESRCH).
bool process_gone(long pid) { return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

}  // namespace

int remove_stale_temporaries(const fs::path& target) {
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string prefix = prefix_of(target);
  std::error_code ec;
  int removed = 0;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix)) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + prefix.size(), &end, 10);
    if (end == name.c_str() + prefix.size() || *end != '.' || !process_gone(pid)) continue;
    std::error_code rm;
    fs::remove_all(entry.path(), rm);
    if (!rm) ++removed;
  }
  return removed;
}

TempDir::TempDir(const fs::path& target) : target_(target) {
  remove_stale_temporaries(target);
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string templ = (parent / (prefix_of(target) + std::to_string(::getpid()) + ".XXXXXX")).string();
  if (!::mkdtemp(templ.data()))
    throw RuntimeError(parent.string() + ": cannot create a temporary folder: " + std::strerror(errno));
  path_ = templ;
  // mkdtemp makes 0700; a model folder is readable by all, like its files. (Not 0777 & ~umask:
  // reading the umask means setting it, which races with other threads.)
  if (::chmod(path_.c_str(), 0755) != 0)
    throw RuntimeError(path_.string() + ": cannot set permissions: " + std::strerror(errno));
}

TempDir::~TempDir() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void TempDir::commit(const std::function<bool(const fs::path&)>& replaceable) {
  if (committed_) throw RuntimeError(target_.string() + ": committed twice");
  sync_directory(path_);
  const fs::path parent = target_.has_parent_path() ? target_.parent_path() : fs::path(".");
  std::error_code ec;
  std::optional<TempDir> old;
  if (fs::exists(target_, ec)) {
    if (fs::is_directory(target_, ec) && fs::is_empty(target_, ec)) {
      fs::remove(target_, ec);
    } else {
      if (!replaceable(target_))
        throw UsageError(target_.string() + ": exists and was not written by k3host; not replaced");
      old.emplace(target_.string() + ".old");
      if (::rename(target_.c_str(), (old->path() / "previous").c_str()) != 0)
        throw RuntimeError(target_.string() + ": cannot move the existing folder aside: " + std::strerror(errno));
    }
  }
  if (::rename(path_.c_str(), target_.c_str()) != 0) {
    const int err = errno;
    if (old) (void)::rename((old->path() / "previous").c_str(), target_.c_str());  // put it back
    throw RuntimeError(target_.string() + ": cannot rename the finished folder into place: " + std::strerror(err));
  }
  committed_ = true;
  sync_directory(parent);
}

}  // namespace k3
