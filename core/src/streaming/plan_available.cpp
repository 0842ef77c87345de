// How much memory this process may still use: MemAvailable from /proc/meminfo, capped by
// the cgroup v2 limit (memory.max - memory.current) of the cgroup we run in and its parents,
// or the cgroup v1 limit (memory.limit_in_bytes - memory.usage_in_bytes).
#include <fstream>
#include <sstream>
#include <string>

#include <k3/plan.hpp>

namespace k3 {
namespace {

/// MemAvailable in bytes, 0 when unknown.
std::uint64_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::uint64_t kb = 0;
  std::string unit;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

/// "0::/some/path" from /proc/self/cgroup → /sys/fs/cgroup/some/path.
std::string own_cgroup_dir() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0) return "/sys/fs/cgroup" + line.substr(3);
  return "/sys/fs/cgroup";
}

/// A number from a cgroup file; false for "max", absent or unreadable.
bool read_number(const std::string& file, std::uint64_t& out) {
  std::ifstream in(file);
  std::string s;
  if (!(in >> s) || s == "max") return false;
  try {
    out = std::stoull(s);
  } catch (...) {
    return false;
  }
  return true;
}

}  // namespace

std::uint64_t available_memory(std::string* source) {
  std::uint64_t avail = mem_available();
  std::string from = "MemAvailable";
  // Walk up from our cgroup: the tightest limit on the path applies.
  std::string dir = own_cgroup_dir();
  while (dir.size() >= std::string("/sys/fs/cgroup").size()) {
    std::uint64_t max = 0, current = 0;
    if (read_number(dir + "/memory.max", max)) {
      (void)read_number(dir + "/memory.current", current);
      const std::uint64_t room = max > current ? max - current : 0;
      if (avail == 0 || room < avail) {
        avail = room;
        from = "cgroup limit " + dir + "/memory.max";
      }
    }
    if (dir == "/sys/fs/cgroup") break;
    dir = dir.substr(0, dir.find_last_of('/'));
  }
  // cgroup v1 (containers mount their own memory controller at its root).
  std::uint64_t limit = 0, usage = 0;
  if (read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes", limit) && limit < (1ull << 60)) {
    (void)read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes", usage);
    const std::uint64_t room = limit > usage ? limit - usage : 0;
    if (avail == 0 || room < avail) {
      avail = room;
      from = "cgroup v1 memory.limit_in_bytes";
    }
  }
  if (source != nullptr) *source = from;
  return avail;
}

}  // namespace k3
