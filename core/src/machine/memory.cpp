// probe_memory(): MemTotal and MemAvailable from proc/meminfo, and the tightest cgroup
// memory limit on our path: cgroup v2 memory.max (with that cgroup's memory.current) from
// our cgroup up to the root, else cgroup v1 memory.limit_in_bytes (a v1 "no limit" is a
// huge number, not "max").
#include <fstream>
#include <string>

#include <k3/machine.hpp>

#include "machine/sys_files.hpp"

namespace k3::machine {

namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kV1Unlimited = 1ull << 60;  // v1 reports "no limit" as ~2^63 rounded to a page

}  // namespace

std::uint64_t MemoryInfo::usable() const {
  if (!cgroup_limit) return available;
  const std::uint64_t room = *cgroup_limit > cgroup_usage ? *cgroup_limit - cgroup_usage : 0;
  return available == 0 ? room : std::min(available, room);
}

std::string MemoryInfo::usable_source() const {
  if (!cgroup_limit) return "MemAvailable";
  const std::uint64_t room = *cgroup_limit > cgroup_usage ? *cgroup_limit - cgroup_usage : 0;
  return available != 0 && available <= room ? "MemAvailable" : "cgroup limit " + cgroup_source;
}

MemoryInfo probe_memory(const fs::path& root) {
  MemoryInfo m;
  {
    std::ifstream in(root / "proc/meminfo");
    std::string key, unit;
    std::uint64_t kb = 0;
    while (in >> key >> kb) {
      std::getline(in, unit);
      if (key == "MemTotal:") m.total = kb * 1024;
      if (key == "MemAvailable:") m.available = kb * 1024;
    }
  }
  // v2: the tightest room (limit - usage) on the path up.
  std::optional<std::uint64_t> best_room;
  for (const fs::path& dir : sys::cgroup_v2_path_up(root)) {
    const auto max = sys::number(dir / "memory.max");
    if (!max) continue;
    const std::uint64_t usage = sys::number(dir / "memory.current").value_or(0);
    const std::uint64_t room = *max > usage ? *max - usage : 0;
    if (!best_room || room < *best_room) {
      best_room = room;
      m.cgroup_limit = *max;
      m.cgroup_usage = usage;
      m.cgroup_source = (dir / "memory.max").string();
    }
  }
  if (m.cgroup_limit) return m;
  // v1.
  if (const auto dir = sys::cgroup_v1_dir(root, "memory")) {
    const auto limit = sys::number(*dir / "memory.limit_in_bytes");
    if (limit && *limit < kV1Unlimited) {
      m.cgroup_limit = *limit;
      m.cgroup_usage = sys::number(*dir / "memory.usage_in_bytes").value_or(0);
      m.cgroup_source = (*dir / "memory.limit_in_bytes").string();
    }
  }
  return m;
}

}  // namespace k3::machine
