// run_sim: every policy at every capacity, each run on a freshly created policy object.
#include <string>
#include <utility>

#include <k3/error.hpp>
#include <k3/plugin_host.hpp>
#include <k3/sim.hpp>

namespace k3 {

double SimResult::hit_rate() const noexcept {
  return counts.requests == 0 ? 0.0 : static_cast<double>(counts.hits) / static_cast<double>(counts.requests);
}

double SimReport::bytes_per_token(const SimResult& r) const noexcept {
  if (stats.tokens == 0) return 0.0;
  return static_cast<double>(r.counts.misses) * static_cast<double>(expert_bytes) / static_cast<double>(stats.tokens);
}

double SimReport::seconds_per_token(const SimResult& r) const noexcept {
  return bandwidth_gbps > 0 ? bytes_per_token(r) / (bandwidth_gbps * 1e9) : 0.0;
}

SimReport run_sim(PluginHost& host, const Trace& trace, std::string trace_file, const SimRequest& request) {
  if (request.policies.empty()) throw UsageError("sim: no policy to simulate");
  if (request.capacities.empty()) throw UsageError("sim: no capacity to simulate");
  if (!(request.bandwidth_gbps > 0)) throw UsageError("sim: --bandwidth must be > 0 GB/s");
  SimReport report;
  report.trace_file = std::move(trace_file);
  report.header = trace.header;
  report.expert_bytes = request.expert_bytes != 0        ? request.expert_bytes
                        : trace.header.expert_bytes != 0 ? trace.header.expert_bytes
                                                         : kK3ExpertBytes;
  report.bandwidth_gbps = request.bandwidth_gbps;
  const Replay replay(trace);
  report.stats = replay.stats();

  std::vector<std::uint64_t> slots;
  for (const CapacitySpec& c : request.capacities)
    slots.push_back(capacity_slots(c, report.expert_bytes, report.stats.working_set));

  for (const SimPolicy& p : request.policies) {
    // A policy with parameters is labelled "name[key=value;...]" so variants stay apart.
    std::string label = p.name;
    for (std::size_t k = 0; k < p.params.size(); ++k)
      label += (k == 0 ? "[" : ";") + p.params[k].first + "=" + p.params[k].second +
               (k + 1 == p.params.size() ? "]" : "");
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const auto policy = host.create_cache(p.name, p.params);
      SimResult r;
      r.policy = label;
      r.capacity_text = request.capacities[i].text;
      r.capacity_slots = slots[i];
      r.counts = replay.run(*policy, p.name, slots[i]);
      report.results.push_back(std::move(r));
    }
  }
  return report;
}

}  // namespace k3
