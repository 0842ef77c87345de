// Replay: plays the host's role for one policy over a whole trace (see k3/sim.hpp for the
// event contract and the lease rule).
#include <time.h>

#include <chrono>
#include <limits>
#include <string>
#include <vector>

#include <k3/error.hpp>
#include <k3/sim.hpp>

namespace k3 {

namespace {

double thread_cpu_seconds() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

constexpr std::uint32_t kNoGroup = std::numeric_limits<std::uint32_t>::max();

std::string describe(sdk::ExpertKey k) {
  return "(layer " + std::to_string(k.layer) + ", expert " + std::to_string(k.expert) + ")";
}

// What the policy may ask while choosing a victim: resident and not leased by the
// token-layer being served.
class SimQuery final : public sdk::VictimQuery {
 public:
  SimQuery(const std::vector<std::uint8_t>& resident, const std::vector<std::uint32_t>& lease, std::uint32_t layers,
           std::uint32_t experts)
      : resident_(resident), lease_(lease), layers_(layers), experts_(experts) {}
  void set_group(std::uint32_t g) noexcept { group_ = g; }
  [[nodiscard]] bool evictable(sdk::ExpertKey key) const noexcept override {
    if (key.layer >= layers_ || key.expert >= experts_) return false;
    const std::size_t d = std::size_t{key.layer} * experts_ + key.expert;
    return resident_[d] != 0 && lease_[d] != group_;
  }

 private:
  const std::vector<std::uint8_t>& resident_;
  const std::vector<std::uint32_t>& lease_;
  std::uint32_t layers_;
  std::uint32_t experts_;
  std::uint32_t group_ = kNoGroup;
};

}  // namespace

TraceStats trace_stats(const Trace& trace) {
  const TraceHeader& h = trace.header;
  TraceStats s;
  s.requests = trace.records.size();
  std::vector<std::uint8_t> seen(std::size_t{h.layers} * h.experts_per_layer, 0);
  std::vector<std::uint8_t> layer_seen(h.layers, 0);
  std::uint32_t run = 0;
  for (std::size_t i = 0; i < trace.records.size(); ++i) {
    const TraceRecord& r = trace.records[i];
    if (i == 0 || r.position != trace.records[i - 1].position) ++s.tokens;
    const bool same_group = i > 0 && r.position == trace.records[i - 1].position && r.layer == trace.records[i - 1].layer;
    run = same_group ? run + 1 : 1;
    if (run > s.max_group) s.max_group = run;
    auto& k = seen[std::size_t{r.layer} * h.experts_per_layer + r.expert];
    if (k == 0) {
      k = 1;
      ++s.distinct_keys;
    }
    if (layer_seen[r.layer] == 0) {
      layer_seen[r.layer] = 1;
      ++s.layers_used;
    }
  }
  s.working_set = std::uint64_t{s.layers_used} * (h.top_k != 0 ? h.top_k : s.max_group);
  return s;
}

struct Replay::Impl {
  TraceHeader header;
  TraceStats stats;
  std::vector<sdk::ExpertKey> keys;   // per request
  std::vector<std::uint32_t> dense;   // per request: layer * experts_per_layer + expert
  std::vector<std::uint32_t> group;   // per request: index of its token-layer
};

Replay::Replay(const Trace& trace) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.header = trace.header;
  if (std::uint64_t{trace.header.layers} * trace.header.experts_per_layer > (std::uint64_t{1} << 31))
    throw UsageError("trace geometry " + std::to_string(trace.header.layers) + " layers x " +
                     std::to_string(trace.header.experts_per_layer) + " experts is too large to simulate");
  m.stats = trace_stats(trace);
  const std::size_t n = trace.records.size();
  m.keys.resize(n);
  m.dense.resize(n);
  m.group.resize(n);
  std::uint64_t g = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const TraceRecord& r = trace.records[i];
    if (i > 0 && (r.position != trace.records[i - 1].position || r.layer != trace.records[i - 1].layer)) ++g;
    if (g >= kNoGroup) throw UsageError("trace has more than 4294967294 token-layers: too long to simulate");
    m.keys[i] = sdk::ExpertKey{r.layer, r.expert};
    m.dense[i] = static_cast<std::uint32_t>(std::size_t{r.layer} * trace.header.experts_per_layer + r.expert);
    m.group[i] = static_cast<std::uint32_t>(g);
  }
}

Replay::~Replay() = default;

const TraceStats& Replay::stats() const noexcept { return impl_->stats; }
std::span<const sdk::ExpertKey> Replay::requests() const noexcept { return impl_->keys; }

ReplayCounts Replay::run(sdk::CachePolicy& policy, std::string_view policy_name, std::uint64_t capacity_slots) const {
  const Impl& m = *impl_;
  const std::string who = std::string(policy_name) + " at " + std::to_string(capacity_slots) + " slots";
  if (capacity_slots < m.stats.max_group)
    throw UsageError("capacity " + std::to_string(capacity_slots) + " slots is smaller than one token-layer's " +
                     std::to_string(m.stats.max_group) + " experts, which must be resident together");
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = thread_cpu_seconds();
  if (const sdk::Status st = policy.reset(capacity_slots); !st.ok())
    throw RuntimeError(who + ": reset failed: " + st.detail);
  if (policy.wants_future()) {
    if (const sdk::Status st = policy.set_future(m.keys); !st.ok())
      throw RuntimeError(who + ": set_future failed: " + st.detail);
  }

  const std::uint32_t layers = m.header.layers;
  const std::uint32_t experts = m.header.experts_per_layer;
  std::vector<std::uint8_t> resident(std::size_t{layers} * experts, 0);
  std::vector<std::uint32_t> lease(resident.size(), kNoGroup);
  SimQuery query(resident, lease, layers, experts);
  ReplayCounts c;
  std::uint64_t used = 0;
  const std::size_t n = m.keys.size();
  for (std::size_t i = 0; i < n; ++i) {
    const sdk::ExpertKey key = m.keys[i];
    const std::uint32_t d = m.dense[i];
    query.set_group(m.group[i]);
    policy.on_access(key, i);
    if (resident[d] != 0) {
      ++c.hits;
    } else {
      ++c.misses;
      if (used < capacity_slots) {
        ++used;
      } else {
        sdk::ExpertKey victim;
        if (const sdk::Status st = policy.choose_victim(key, query, victim); !st.ok())
          throw RuntimeError(who + ": no victim for request " + std::to_string(i) + " " + describe(key) + ": " +
                             sdk::to_string(st.code) + ": " + st.detail);
        if (victim.layer >= layers || victim.expert >= experts ||
            resident[std::size_t{victim.layer} * experts + victim.expert] == 0)
          throw RuntimeError(who + ": chose victim " + describe(victim) + " for request " + std::to_string(i) +
                             ", which is not resident");
        if (!query.evictable(victim))
          throw RuntimeError(who + ": chose victim " + describe(victim) + " for request " + std::to_string(i) +
                             ", which is leased by the layer being served");
        policy.on_remove(victim);
        resident[std::size_t{victim.layer} * experts + victim.expert] = 0;
        ++c.evictions;
      }
      policy.on_insert(key);
      resident[d] = 1;
    }
    lease[d] = m.group[i];
  }
  c.requests = n;
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  c.cpu_seconds = thread_cpu_seconds() - cpu_start;
  return c;
}

}  // namespace k3
