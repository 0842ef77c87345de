// Replay: plays the host's role for one policy over a whole trace, through the same
// cache_batch() as the live expert cache (see k3/sim.hpp and streaming/cache_batch.hpp).
#include <time.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>
#include <vector>

#include <k3/error.hpp>
#include <k3/sim.hpp>

#include "streaming/cache_batch.hpp"

namespace k3 {

namespace {

double thread_cpu_seconds() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The slot arena of a replay, as cache_batch() sees it: which keys are resident, which are
// leased by the batch being served (lease mark == the batch's number), how many slots are
// used.
class SimSlots final : public sdk::VictimQuery {
 public:
  SimSlots(std::uint32_t layers, std::uint32_t experts, std::uint64_t capacity)
      : resident_(std::size_t{layers} * experts, 0),
        lease_(resident_.size(), 0),
        layers_(layers),
        experts_(experts),
        capacity_(capacity) {}
  void next_batch() noexcept { ++batch_; }
  [[nodiscard]] bool evictable(sdk::ExpertKey key) const noexcept override {
    return resident(key) && lease_[dense(key)] != batch_;
  }
  [[nodiscard]] bool resident(sdk::ExpertKey key) const noexcept {
    return key.layer < layers_ && key.expert < experts_ && resident_[dense(key)] != 0;
  }
  void lease(sdk::ExpertKey key) noexcept { lease_[dense(key)] = batch_; }
  bool admit_free(sdk::ExpertKey key) noexcept {
    if (used_ == capacity_) return false;
    ++used_;
    admit(key);
    return true;
  }
  void replace(sdk::ExpertKey victim, sdk::ExpertKey key) noexcept {
    resident_[dense(victim)] = 0;
    admit(key);
  }

 private:
  [[nodiscard]] std::size_t dense(sdk::ExpertKey k) const noexcept {
    return std::size_t{k.layer} * experts_ + k.expert;
  }
  void admit(sdk::ExpertKey key) noexcept {
    resident_[dense(key)] = 1;
    lease_[dense(key)] = batch_;
  }
  std::vector<std::uint8_t> resident_;
  std::vector<std::uint64_t> lease_;
  std::uint32_t layers_;
  std::uint32_t experts_;
  std::uint64_t capacity_;
  std::uint64_t used_ = 0;
  std::uint64_t batch_ = 0;  // 0 = no batch yet; lease marks of older batches are stale
};

}  // namespace

TraceStats trace_stats(const Trace& trace) {
  const TraceHeader& h = trace.header;
  TraceStats s;
  s.requests = trace.records.size();
  std::vector<std::uint8_t> seen(std::size_t{h.layers} * h.experts_per_layer, 0);
  std::vector<std::uint8_t> layer_seen(h.layers, 0);
  std::vector<std::uint64_t> in_group(seen.size(), 0);  // key → last group (1-based) that asked for it
  std::uint32_t distinct = 0;
  // Token forwards: every forward of a token passes the lowest layer with requests; there
  // a new token starts with a group or a position change (a chunk lists its tokens in turn).
  std::uint32_t first_layer = std::numeric_limits<std::uint32_t>::max();
  for (const TraceRecord& r : trace.records) first_layer = std::min<std::uint32_t>(first_layer, r.layer);
  const TraceRecord* previous_first = nullptr;
  for (std::size_t i = 0; i < trace.records.size(); ++i) {
    const TraceRecord& r = trace.records[i];
    if (r.layer == first_layer) {
      if (previous_first == nullptr || i == 0 || r.starts_group || r.position != previous_first->position) ++s.tokens;
      previous_first = &r;
    }
    if (i == 0 || r.starts_group) {
      ++s.groups;
      distinct = 0;
    }
    const std::size_t d = std::size_t{r.layer} * h.experts_per_layer + r.expert;
    if (in_group[d] != s.groups) {
      in_group[d] = s.groups;
      if (++distinct > s.max_group) s.max_group = distinct;
    }
    if (seen[d] == 0) {
      seen[d] = 1;
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
  struct Group {
    std::uint64_t first = 0, end = 0;              // its requests [first, end)
    std::uint64_t distinct = 0, distinct_end = 0;  // its distinct experts in ids/uses
    std::uint32_t layer = 0;
  };
  TraceHeader header;
  TraceStats stats;
  std::vector<sdk::ExpertKey> keys;  // per request
  std::vector<Group> groups;
  std::vector<std::uint32_t> ids;   // per group: distinct experts, ascending
  std::vector<std::uint64_t> uses;  // requests behind each of ids
};

Replay::Replay(const Trace& trace) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.header = trace.header;
  const TraceHeader& h = trace.header;
  if (std::uint64_t{h.layers} * h.experts_per_layer > (std::uint64_t{1} << 31))
    throw UsageError("trace geometry " + std::to_string(h.layers) + " layers x " + std::to_string(h.experts_per_layer) +
                     " experts is too large to simulate");
  m.stats = trace_stats(trace);
  const std::size_t n = trace.records.size();
  m.keys.resize(n);
  m.groups.reserve(static_cast<std::size_t>(m.stats.groups));
  m.ids.reserve(n);
  m.uses.reserve(n);
  std::vector<std::uint32_t> group_ids;
  for (std::size_t i = 0; i < n; ++i) {
    const TraceRecord& r = trace.records[i];
    if (r.layer >= h.layers || r.expert >= h.experts_per_layer)
      throw UsageError("trace record " + std::to_string(i) + " (layer " + std::to_string(r.layer) + ", expert " +
                       std::to_string(r.expert) + ") is outside the geometry");
    if (i == 0 || r.starts_group) {
      m.groups.push_back({i, i, 0, 0, r.layer});
    } else if (r.layer != m.groups.back().layer) {
      throw UsageError("trace record " + std::to_string(i) + " (layer " + std::to_string(r.layer) +
                       ") joins a serving group of layer " + std::to_string(m.groups.back().layer));
    }
    m.groups.back().end = i + 1;
    m.keys[i] = sdk::ExpertKey{r.layer, r.expert};
  }
  // Each group's distinct experts in id order, with how many of its requests ask for each.
  for (Impl::Group& g : m.groups) {
    group_ids.clear();
    for (std::uint64_t i = g.first; i < g.end; ++i) group_ids.push_back(m.keys[i].expert);
    std::sort(group_ids.begin(), group_ids.end());
    g.distinct = m.ids.size();
    for (std::size_t j = 0; j < group_ids.size(); ++j) {
      if (j > 0 && group_ids[j] == group_ids[j - 1]) {
        ++m.uses.back();
        continue;
      }
      m.ids.push_back(group_ids[j]);
      m.uses.push_back(1);
    }
    g.distinct_end = m.ids.size();
  }
}

Replay::~Replay() = default;

const TraceStats& Replay::stats() const noexcept { return impl_->stats; }
std::span<const sdk::ExpertKey> Replay::requests() const noexcept { return impl_->keys; }

ReplayCounts Replay::run(sdk::CachePolicy& policy, std::string_view policy_name, std::uint64_t capacity_slots) const {
  const Impl& m = *impl_;
  const std::string who = std::string(policy_name) + " at " + std::to_string(capacity_slots) + " slots";
  if (capacity_slots == 0) throw UsageError("capacity must be at least one slot");
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = thread_cpu_seconds();
  if (const sdk::Status st = policy.reset(capacity_slots); !st.ok())
    throw RuntimeError(who + ": reset failed: " + st.detail);
  if (policy.wants_future()) {
    if (const sdk::Status st = policy.set_future(m.keys); !st.ok())
      throw RuntimeError(who + ": set_future failed: " + st.detail);
  }

  SimSlots slots(m.header.layers, m.header.experts_per_layer, capacity_slots);
  streaming::BatchCounts served;
  const std::span<const std::uint32_t> all_ids(m.ids);
  for (std::size_t gi = 0; gi < m.groups.size(); ++gi) {
    const Impl::Group& g = m.groups[gi];
    for (std::uint64_t i = g.first; i < g.end; ++i) policy.on_access(m.keys[i], i);
    // Batches of at most capacity_slots distinct experts, as the live engine asks for them.
    for (std::uint64_t b = g.distinct; b < g.distinct_end; b += capacity_slots) {
      const std::uint64_t count = std::min(capacity_slots, g.distinct_end - b);
      slots.next_batch();
      streaming::cache_batch(
          policy, slots, g.layer, all_ids.subspan(static_cast<std::size_t>(b), static_cast<std::size_t>(count)),
          [&](std::size_t j) { return m.uses[static_cast<std::size_t>(b) + j]; }, served,
          [&](const std::string& why) {
        throw RuntimeError(who + ": serving group " + std::to_string(gi) + " (requests " + std::to_string(g.first) +
                           " to " + std::to_string(g.end - 1) + "): " + why);
          });
    }
  }
  ReplayCounts c;
  c.requests = m.keys.size();
  c.hits = served.hits;
  c.misses = served.misses;
  c.evictions = served.evictions;
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  c.cpu_seconds = thread_cpu_seconds() - cpu_start;
  return c;
}

}  // namespace k3
