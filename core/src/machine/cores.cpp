// probe_cores(): online CPUs, physical cores (distinct package and core ids in the
// topology folder), this process's affinity mask, and a cgroup CPU quota (v2 cpu.max, the
// tightest on the path up; v1 cpu.cfs_quota_us / cpu.cfs_period_us).
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include <k3/machine.hpp>

#include "machine/sys_files.hpp"

namespace k3::machine {

namespace fs = std::filesystem;

namespace {

/// The CPUs of a list such as "0-3,5"; nullopt when it is not one.
std::optional<std::vector<unsigned>> parse_cpu_list(const std::string& text) {
  std::vector<unsigned> cpus;
  std::stringstream s(text);
  std::string item;
  while (std::getline(s, item, ',')) {
    while (!item.empty() && (item.back() == '\n' || item.back() == ' ')) item.pop_back();
    if (item.empty()) continue;
    const auto dash = item.find('-');
    try {
      std::size_t used = 0;
      const unsigned first = static_cast<unsigned>(std::stoul(item.substr(0, dash), &used));
      if (used != (dash == std::string::npos ? item.size() : dash)) return std::nullopt;
      unsigned last = first;
      if (dash != std::string::npos) {
        const std::string tail = item.substr(dash + 1);
        last = static_cast<unsigned>(std::stoul(tail, &used));
        if (used != tail.size() || last < first) return std::nullopt;
      }
      for (unsigned c = first; c <= last; ++c) cpus.push_back(c);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  if (cpus.empty()) return std::nullopt;
  return cpus;
}

/// "0-1,4" from a sorted CPU set.
std::string to_cpu_list(const std::vector<unsigned>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

/// "max 100000" or "150000 100000" (quota, period in µs) → CPUs; nullopt for no limit.
std::optional<double> cpu_max_cpus(const std::string& line) {
  std::stringstream s(line);
  std::string quota;
  double period = 0;
  if (!(s >> quota >> period) || quota == "max" || period <= 0) return std::nullopt;
  try {
    return std::stod(quota) / period;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<unsigned> count_cpu_list(const std::string& text) {
  const auto cpus = parse_cpu_list(text);
  if (!cpus) return std::nullopt;
  return static_cast<unsigned>(std::set<unsigned>(cpus->begin(), cpus->end()).size());
}

unsigned CoreInfo::usable() const {
  unsigned n = affinity != 0 ? affinity : logical;
  if (cgroup_cpus) n = std::min(n, std::max(1u, static_cast<unsigned>(std::ceil(*cgroup_cpus - 1e-9))));
  return std::max(1u, n);
}

CoreInfo probe_cores(const fs::path& root) {
  CoreInfo c;
  const fs::path cpu_dir = root / "sys/devices/system/cpu";
  std::vector<unsigned> online;
  if (const auto line = sys::first_line(cpu_dir / "online"))
    if (auto cpus = parse_cpu_list(*line)) online = std::move(*cpus);
  c.logical = static_cast<unsigned>(online.size());
  std::set<std::pair<std::uint64_t, std::uint64_t>> cores;
  bool topology = !online.empty();
  for (const unsigned cpu : online) {
    const fs::path t = cpu_dir / ("cpu" + std::to_string(cpu)) / "topology";
    const auto package = sys::number(t / "physical_package_id");
    const auto core = sys::number(t / "core_id");
    if (!package || !core) {
      topology = false;
      break;
    }
    cores.emplace(*package, *core);
  }
  c.physical = topology ? static_cast<unsigned>(cores.size()) : 0;

  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    std::vector<unsigned> mine;
    for (unsigned cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set)) mine.push_back(cpu);
    c.affinity = static_cast<unsigned>(mine.size());
    c.affinity_list = to_cpu_list(mine);
  }

  for (const fs::path& dir : sys::cgroup_v2_path_up(root)) {
    const auto line = sys::first_line(dir / "cpu.max");
    if (!line) continue;
    const auto cpus = cpu_max_cpus(*line);
    if (cpus && (!c.cgroup_cpus || *cpus < *c.cgroup_cpus)) {
      c.cgroup_cpus = cpus;
      c.cgroup_source = (dir / "cpu.max").string();
    }
  }
  if (!c.cgroup_cpus)
    if (const auto dir = sys::cgroup_v1_dir(root, "cpu")) {
      const auto quota = sys::number(*dir / "cpu.cfs_quota_us");  // -1 (no limit) reads as nullopt
      const auto period = sys::number(*dir / "cpu.cfs_period_us");
      if (quota && period && *period > 0) {
        c.cgroup_cpus = static_cast<double>(*quota) / static_cast<double>(*period);
        c.cgroup_source = (*dir / "cpu.cfs_quota_us").string();
      }
    }
  return c;
}

int compute_threads(std::int64_t setting) {
  return setting > 0 ? static_cast<int>(setting) : std::max(1, omp_get_num_procs());
}

}  // namespace k3::machine
