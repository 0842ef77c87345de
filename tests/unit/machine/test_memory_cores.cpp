// The memory and core probes against fake /proc and /sys trees: cgroup v2 limits along the
// path (the tightest wins), the v1 fallback and its "unlimited", CPU quotas, topology.
#include <catch2/catch.hpp>

#include <k3/machine.hpp>

#include "machine_test_support.hpp"

using k3::test::FakeRoot;
namespace m = k3::machine;

namespace {
const char* kMeminfo = "MemTotal:       16000000 kB\nMemFree:         1000 kB\nMemAvailable:    8000000 kB\n";
}

TEST_CASE("memory: MemTotal and MemAvailable without any cgroup limit") {
  FakeRoot root("mem-none");
  root.put("proc/meminfo", kMeminfo);
  root.put("proc/self/cgroup", "0::/user.slice/me\n");
  root.put("sys/fs/cgroup/user.slice/me/memory.max", "max\n");
  const m::MemoryInfo info = m::probe_memory(root.path());
  CHECK(info.total == 16000000ull * 1024);
  CHECK(info.available == 8000000ull * 1024);
  CHECK_FALSE(info.cgroup_limit);
  CHECK(info.usable() == info.available);
  CHECK(info.usable_source() == "MemAvailable");
}

TEST_CASE("memory: the tightest cgroup v2 limit on the path up applies, minus its usage") {
  FakeRoot root("mem-v2");
  root.put("proc/meminfo", kMeminfo);
  root.put("proc/self/cgroup", "0::/a/b\n");
  root.put("sys/fs/cgroup/a/b/memory.max", "4000000000\n");
  root.put("sys/fs/cgroup/a/b/memory.current", "1000000000\n");
  root.put("sys/fs/cgroup/a/memory.max", "2500000000\n");
  root.put("sys/fs/cgroup/a/memory.current", "500000000\n");
  const m::MemoryInfo info = m::probe_memory(root.path());
  REQUIRE(info.cgroup_limit);
  CHECK(*info.cgroup_limit == 2500000000ull);
  CHECK(info.cgroup_usage == 500000000ull);
  CHECK(info.usable() == 2000000000ull);
  CHECK(info.usable_source().find("a/memory.max") != std::string::npos);
}

TEST_CASE("memory: cgroup v1 memory.limit_in_bytes, and its huge 'unlimited' ignored") {
  FakeRoot root("mem-v1");
  root.put("proc/meminfo", kMeminfo);
  root.put("proc/self/cgroup", "5:memory:/docker/x\n");
  root.put("sys/fs/cgroup/memory/docker/x/memory.limit_in_bytes", "3000000000\n");
  root.put("sys/fs/cgroup/memory/docker/x/memory.usage_in_bytes", "1000000000\n");
  m::MemoryInfo info = m::probe_memory(root.path());
  REQUIRE(info.cgroup_limit);
  CHECK(*info.cgroup_limit == 3000000000ull);
  CHECK(info.usable() == 2000000000ull);

  root.put("sys/fs/cgroup/memory/docker/x/memory.limit_in_bytes", "9223372036854771712\n");
  info = m::probe_memory(root.path());
  CHECK_FALSE(info.cgroup_limit);
  CHECK(info.usable() == info.available);
}

TEST_CASE("cores: online CPUs, physical cores from the topology, cgroup v2 cpu.max") {
  FakeRoot root("cores-v2");
  root.put("sys/devices/system/cpu/online", "0-3\n");
  for (int cpu = 0; cpu < 4; ++cpu) {  // two cores with two threads each
    const std::string t = "sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    root.put(t + "physical_package_id", "0\n");
    root.put(t + "core_id", std::to_string(cpu / 2) + "\n");
  }
  root.put("proc/self/cgroup", "0::/lim\n");
  root.put("sys/fs/cgroup/lim/cpu.max", "150000 100000\n");
  root.put("sys/fs/cgroup/cpu.max", "max 100000\n");
  const m::CoreInfo c = m::probe_cores(root.path());
  CHECK(c.logical == 4);
  CHECK(c.physical == 2);
  CHECK(c.affinity >= 1);  // the real process's mask
  REQUIRE(c.cgroup_cpus);
  CHECK(*c.cgroup_cpus == Approx(1.5));
  CHECK(c.usable() == std::min(c.affinity, 2u));
}

TEST_CASE("cores: no topology means physical unknown, a cgroup v1 CFS quota, and -1 as no quota") {
  FakeRoot root("cores-v1");
  root.put("sys/devices/system/cpu/online", "0-1,4\n");
  root.put("proc/self/cgroup", "3:cpu,cpuacct:/\n");
  root.put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "50000\n");
  root.put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  m::CoreInfo c = m::probe_cores(root.path());
  CHECK(c.logical == 3);
  CHECK(c.physical == 0);
  REQUIRE(c.cgroup_cpus);
  CHECK(*c.cgroup_cpus == Approx(0.5));
  CHECK(c.usable() == 1);

  root.put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  c = m::probe_cores(root.path());
  CHECK_FALSE(c.cgroup_cpus);
}

TEST_CASE("cores: CPU lists") {
  CHECK(m::count_cpu_list("0") == 1u);
  CHECK(m::count_cpu_list("0-3,5,7-8\n") == 7u);
  CHECK(m::count_cpu_list("0-1,1") == 2u);
  CHECK_FALSE(m::count_cpu_list(""));
  CHECK_FALSE(m::count_cpu_list("a-b"));
  CHECK_FALSE(m::count_cpu_list("3-1"));
}

TEST_CASE("memory and cores of this machine are plausible") {
  const m::MemoryInfo mem = m::probe_memory();
  CHECK(mem.total > 0);
  CHECK(mem.usable() > 0);
  CHECK(mem.usable() <= mem.total);
  const m::CoreInfo cores = m::probe_cores();
  CHECK(cores.logical >= 1);
  CHECK(cores.affinity >= 1);
  CHECK(cores.usable() >= 1);
}
