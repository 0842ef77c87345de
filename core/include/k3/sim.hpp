// The expert-cache simulator behind `k3host sim`: replays a trace (k3/trace.hpp) through
// cache policy plugins at several capacities, playing the host's role exactly as a live
// run does, and renders the results (table, CSV, JSON, SVG). Also the synthetic trace
// generator used to study policies on realistic (skewed, reusing) routing.
//
// The host role is the live expert cache's, run by the same code (core/src/streaming/
// cache_batch.hpp), so replaying a run's own trace at the run's slot count gives exactly
// its hits and misses, for every policy. Per serving group of the trace (one forward
// chunk's requests at one layer, k3/trace.hpp):
//   on_access(key, seq) for every request of the group, in trace order (seq = record index);
//   then the group's distinct experts in id order, in batches of at most capacity: the
//   batch's resident experts are hits and leased; then each missing expert in id order:
//     a free slot:     on_insert(key)
//     cache full:      choose_victim(key, query) -> victim; on_remove(victim); on_insert(key)
//   and the batch's leases end.
// query.evictable() is false for keys leased by the batch being served; nothing else is
// ever leased or pinned; there is no prefetch. Requests count as hits or misses one by
// one: an expert asked for by u requests of its group counts u hits when resident, else u
// misses (it is read once). A victim that is not resident or is leased is an error
// (RuntimeError naming the policy), as it is in the live host.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <k3/cache_policy.hpp>
#include <k3/trace.hpp>

namespace k3 {

class PluginHost;

/// Default bytes of one routed expert: the full K3 (3 x 3072 x 3584 MXFP4 parameters at
/// 0.53125 B, docs/model-spec.md §1).
inline constexpr std::uint64_t kK3ExpertBytes = 17'547'264;

/// Facts about a trace the simulator needs.
struct TraceStats {
  std::uint64_t requests = 0;
  std::uint64_t tokens = 0;  ///< token forwards: tokens passing the lowest requested layer (0 for an empty trace)
  std::uint64_t groups = 0;  ///< serving groups (chunk-layers)
  std::uint64_t distinct_keys = 0;  ///< distinct (layer, expert) pairs requested
  std::uint32_t layers_used = 0;    ///< distinct layers with at least one request
  std::uint32_t max_group = 0;      ///< most distinct experts one serving group asks for
  std::uint64_t working_set = 0;    ///< one token's working set: layers_used x top-k (slots)
};
TraceStats trace_stats(const Trace& trace);

/// A capacity as written by the user: "3647" (slots), "64GB" (decimal GB of expert
/// bytes, rounded down to whole slots) or "2.5x" (multiples of one token's working set,
/// rounded down). UsageError for anything else.
struct CapacitySpec {
  enum class Unit { slots, gigabytes, working_sets };
  Unit unit = Unit::slots;
  double value = 0;
  std::string text;
};
CapacitySpec parse_capacity(std::string_view text);
/// Slots for `spec`; UsageError when the result is 0.
std::uint64_t capacity_slots(const CapacitySpec& spec, std::uint64_t expert_bytes, std::uint64_t working_set);

/// Counters of one replay.
struct ReplayCounts {
  std::uint64_t requests = 0;
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t evictions = 0;
  double seconds = 0;      ///< wall time of the replay loop (set_future included)
  double cpu_seconds = 0;  ///< CPU time of the replaying thread over the same span (meaningful on a busy machine)
};

/// A trace prepared for replay (keys, serving groups with their distinct experts); reusable
/// for any number of policies and capacities. UsageError for a record outside the geometry
/// or a group that spans layers.
class Replay {
 public:
  explicit Replay(const Trace& trace);
  ~Replay();
  Replay(const Replay&) = delete;
  Replay& operator=(const Replay&) = delete;

  /// Replays the whole trace through `policy` (reset to `capacity_slots` first; given the
  /// future when it wants it). A group with more distinct experts than slots is served in
  /// several batches, as live. UsageError for 0 slots; RuntimeError naming `policy_name`
  /// when the policy fails or breaks the contract.
  ReplayCounts run(sdk::CachePolicy& policy, std::string_view policy_name, std::uint64_t capacity_slots) const;

  [[nodiscard]] const TraceStats& stats() const noexcept;
  /// The request stream as ExpertKeys (index = seq), as handed to set_future().
  [[nodiscard]] std::span<const sdk::ExpertKey> requests() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// One policy to simulate: plugin name and its parameters.
struct SimPolicy {
  std::string name;
  std::vector<std::pair<std::string, std::string>> params;
};

struct SimRequest {
  std::vector<SimPolicy> policies;
  std::vector<CapacitySpec> capacities;
  std::uint64_t expert_bytes = 0;  ///< 0: the trace header's, else kK3ExpertBytes
  double bandwidth_gbps = 0;       ///< for s/token; must be > 0
};

struct SimResult {
  std::string policy;
  std::string capacity_text;  ///< as the user wrote it
  std::uint64_t capacity_slots = 0;
  ReplayCounts counts;
  [[nodiscard]] double hit_rate() const noexcept;
};

struct SimReport {
  std::string trace_file;
  TraceHeader header;
  TraceStats stats;
  std::uint64_t expert_bytes = 0;
  double bandwidth_gbps = 0;
  std::vector<SimResult> results;  ///< policy-major, capacities in the order given
  [[nodiscard]] double bytes_per_token(const SimResult& r) const noexcept;
  [[nodiscard]] double seconds_per_token(const SimResult& r) const noexcept;
};

/// Runs every policy (created fresh per capacity through `host`) at every capacity.
SimReport run_sim(PluginHost& host, const Trace& trace, std::string trace_file, const SimRequest& request);

/// Renderings. The table is fixed-width text for a terminal; CSV has a header row; JSON is
/// an object with the trace facts and a "results" array; SVG plots hit rate against
/// capacity per policy with belady (when present) drawn as the ceiling.
std::string sim_table(const SimReport& report);
std::string sim_csv(const SimReport& report);
std::string sim_json(const SimReport& report);
std::string sim_svg(const SimReport& report);
/// Writes one of the renderings to `file` under a temporary name, renamed into place.
void write_report_file(const std::filesystem::path& file, std::string_view content);

/// Synthetic traces for study. Per layer, expert popularity is Zipf(s) over a random
/// permutation of the experts (rank r has weight 1/(r+1)^s; s = 0 is uniform). For each
/// token and layer, each expert the layer chose at the previous token is chosen again with
/// probability `reuse` (independently, in its previous order); the rest of the top-k are
/// drawn by popularity without replacement, so a token-layer's experts are distinct.
/// Deterministic for a given seed (std::mt19937_64) on every platform.
///
/// `recompute_prompt` P > 0 emulates full-recompute decode (how the C99 engine recorded its
/// published K3 trace): the routing of positions 0..tokens-1 is drawn as above, then the
/// request stream is the forwards of a decode that recomputes every position at every
/// step: positions 0..P-1, then 0..P, ..., then 0..tokens-1. Records carry the position
/// being recomputed. P = 0 (default): one forward per position (incremental decode).
/// Either way tokens are served one at a time: each token-layer is a serving group.
struct TraceGenSettings {
  std::uint32_t layers = 0;
  std::uint32_t experts = 0;
  std::uint32_t top_k = 0;
  std::uint32_t tokens = 0;
  double zipf = 0;
  double reuse = 0;
  std::uint32_t recompute_prompt = 0;
  std::uint64_t seed = 1;
  std::uint64_t expert_bytes = kK3ExpertBytes;
};
/// UsageError for 0 layers/experts/top-k/tokens, top-k > experts, zipf < 0, reuse outside
/// [0, 1], recompute_prompt > tokens.
Trace generate_trace(const TraceGenSettings& settings);
/// Reads a generator preset (configs/traces/*.yaml: keys layers, experts, top_k, tokens,
/// zipf, reuse, recompute_prompt, seed, expert_bytes; all optional over `base`). UsageError "<file>: <key>: ..."
/// for unknown keys or bad values.
TraceGenSettings load_trace_preset(const std::filesystem::path& file, TraceGenSettings base);

}  // namespace k3
