// How much memory this process may still use: MemAvailable, capped by the tightest cgroup
// limit on our path (v2 memory.max - memory.current, or v1 memory.limit_in_bytes -
// memory.usage_in_bytes). The probing itself is machine/'s (k3/machine.hpp), shared with
// `k3host doctor`.
#include <k3/machine.hpp>
#include <k3/plan.hpp>

namespace k3 {

std::uint64_t available_memory(std::string* source) {
  const machine::MemoryInfo m = machine::probe_memory();
  if (source != nullptr) *source = m.usable_source();
  return m.usable();
}

}  // namespace k3
