// The simulator plays the host: hit counts on hand-made traces computed by hand for LRU
// and Belady (serving groups, batches, the lease rule), contract violations refused,
// capacities parsed.
#include <catch2/catch.hpp>

#include <algorithm>

#include <k3/error.hpp>
#include <k3/plugin_host.hpp>
#include <k3/sim.hpp>

namespace {

// Geometry 2 layers x 4 experts, top-2, three tokens. Keys are written LE = (layer, expert).
//   seq: 0 00  1 01  2 10  3 11 | 4 00  5 02  6 12  7 13 | 8 01  9 02  10 10  11 11
//        token 0                | token 1               | token 2
k3::Trace hand_trace() {
  k3::Trace t;
  t.header.layers = 2;
  t.header.experts_per_layer = 4;
  t.header.top_k = 2;
  t.header.expert_bytes = 1000;
  const std::uint16_t rec[][3] = {{0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {0, 1, 1}, {1, 0, 0}, {1, 0, 2},
                                  {1, 1, 2}, {1, 1, 3}, {2, 0, 1}, {2, 0, 2}, {2, 1, 0}, {2, 1, 1}};
  for (const auto& r : rec) t.records.push_back({r[0], r[1], r[2]});
  k3::group_by_token_layer(t);  // served one token at a time
  t.header.record_count = t.records.size();
  return t;
}

// One layer x 4 experts, top-2: a prefill chunk of two tokens served as ONE group, then two
// decode steps. Keys are expert ids (layer 0).
//   group 0 (tokens 0-1): seq 0 e1, 1 e0 | 2 e1, 3 e2   distinct [0 1 2], uses [1 2 1]
//   group 1 (token 2):    seq 4 e3, 5 e1               distinct [1 3]
//   group 2 (token 3):    seq 6 e0, 7 e2               distinct [0 2]
k3::Trace chunked_trace() {
  k3::Trace t;
  t.header.layers = 1;
  t.header.experts_per_layer = 4;
  t.header.top_k = 2;
  const std::uint32_t rec[][3] = {{0, 1, 1}, {0, 0, 0}, {1, 1, 0}, {1, 2, 0},
                                  {2, 3, 1}, {2, 1, 0}, {3, 0, 1}, {3, 2, 0}};
  for (const auto& r : rec)  // {position, expert, starts a group}
    t.records.push_back({r[0], 0, static_cast<std::uint16_t>(r[1]), r[2] != 0});
  t.header.record_count = t.records.size();
  return t;
}

bool have_plugin(k3::PluginHost& host, const std::string& name) {
  return std::any_of(host.plugins().begin(), host.plugins().end(),
                     [&](const k3::PluginInfo& p) { return p.kind == k3::PluginKind::cache && p.name == name; });
}

}  // namespace

TEST_CASE("sim: Belady on the hand trace, with the current layer leased", "[sim]") {
  // Capacity 4; each token-layer is a group: its accesses first, then its experts in id
  // order, the resident ones leased before any miss is placed.
  // Seqs 0-3 fill the cache {00 01 10 11}.
  // Group (4 00, 5 02): next uses after seq 5: 00 never, 01@8, 10@10, 11@11. 00 hits and
  //   is leased, so 02 evicts the farthest other key: 11.          {00 01 02 10}
  // Group (6 12, 7 13): next uses 00 never, 01@8, 02@9, 10@10.
  //   12 -> 00 (never); 13: 12 is leased -> 10 (@10).             {01 02 12 13}
  // Group (8 01, 9 02): both hit.
  // Group (10 10, 11 11): every resident key is never used again.
  //   10 -> the lowest packed key 01; 11: 10 is leased -> 02.
  // Hits 4 8 9 = 3; misses 9; evictions 5.
  k3::PluginHost host;
  const k3::Replay replay(hand_trace());
  const auto belady = host.create_cache("belady", {});
  const k3::ReplayCounts c = replay.run(*belady, "belady", 4);
  CHECK(c.requests == 12);
  CHECK(c.hits == 3);
  CHECK(c.misses == 9);
  CHECK(c.evictions == 5);
}

TEST_CASE("sim: LRU on the hand trace", "[sim]") {
  // Capacity 4, victims = least recently used evictable key (oldest first below).
  // Seqs 0-3 fill: 00 01 10 11.
  // Group (00 02): access 00 -> 01 10 11 00; 00 hits; 02 evicts 01 -> 10 11 00 02.
  // Group (12 13): 12 evicts 10, 13 evicts 11 -> 00 02 12 13.
  // Group (01 02): access 02 -> 00 12 13 02; 02 hits; 01 evicts 00 -> 12 13 02 01.
  // Group (10 11): 10 evicts 12, 11 evicts 13.
  // Hits 4 9 = 2; evictions 6.
  k3::PluginHost host;
  if (!have_plugin(host, "lru")) {
    WARN("SKIPPED: the lru cache plugin is not built (plugins/cache/lru)");
    return;
  }
  const k3::Replay replay(hand_trace());
  const auto lru = host.create_cache("lru", {});
  const k3::ReplayCounts c = replay.run(*lru, "lru", 4);
  CHECK(c.hits == 2);
  CHECK(c.evictions == 6);
}

TEST_CASE("sim: a chunk is one group, served in batches of at most the capacity", "[sim]") {
  k3::PluginHost host;
  if (!have_plugin(host, "lru")) {
    WARN("SKIPPED: the lru cache plugin is not built (plugins/cache/lru)");
    return;
  }
  const k3::Replay replay(chunked_trace());
  // Capacity 2, LRU (oldest first).
  // Group 0: nothing resident. Batch [0 1]: both miss (1 + 2 requests), free slots -> 0 1.
  //   Batch [2]: miss (1 request); 0 and 1 are no longer leased: 2 evicts 0 -> 1 2.
  // Group 1: access 1 -> 2 1. Batch [1 3]: 1 hits (1) and is leased; 3 evicts 2 -> 1 3.
  // Group 2: nothing resident of [0 2]: 0 evicts 1 -> 3 0; 2 evicts 3 (0 is leased) -> 0 2.
  // Requests 8, hits 1, misses 7, evictions 4.
  const auto lru = host.create_cache("lru", {});
  const k3::ReplayCounts c = replay.run(*lru, "lru", 2);
  CHECK(c.requests == 8);
  CHECK(c.hits == 1);
  CHECK(c.misses == 7);
  CHECK(c.evictions == 4);
  // Capacity 4: only the 4 compulsory misses (experts 0 1 2 3, counted per request: the
  // chunk asks for 1 twice) -> misses 1 + 2 + 1 (group 0) + 1 (3) = 5, hits 3.
  const k3::ReplayCounts big = replay.run(*lru, "lru", 4);
  CHECK(big.hits == 3);
  CHECK(big.misses == 5);
  CHECK(big.evictions == 0);
  // Capacity 1 (less than one token's top-k): every batch is one expert.
  // Group 0: [0] miss, [1] miss evicts 0, [2] miss evicts 1 (4 requests missed).
  // Group 1: [1] miss evicts 2, [3] miss evicts 1. Group 2: [0] evicts 3, [2] evicts 0.
  const k3::ReplayCounts one = replay.run(*lru, "lru", 1);
  CHECK(one.hits == 0);
  CHECK(one.evictions == 6);
}

TEST_CASE("sim: Belady on the chunked trace", "[sim]") {
  // Capacity 2. Group 0: batch [0 1] fills; batch [2]: next uses after seq 3: 0@6, 1@5 ->
  //   evict 0 -> {1 2}. Group 1: 1 hits, leased; 3 evicts 2 (the only other) -> {1 3}.
  // Group 2: all never used again: 0 evicts the lower key 1; 2 evicts 3 (0 leased).
  // Hits 1, misses 7, evictions 4.
  k3::PluginHost host;
  const k3::Replay replay(chunked_trace());
  const auto belady = host.create_cache("belady", {});
  const k3::ReplayCounts c = replay.run(*belady, "belady", 2);
  CHECK(c.hits == 1);
  CHECK(c.misses == 7);
  CHECK(c.evictions == 4);
}

TEST_CASE("sim: trace facts", "[sim]") {
  const k3::TraceStats s = k3::trace_stats(hand_trace());
  CHECK(s.requests == 12);
  CHECK(s.tokens == 3);
  CHECK(s.groups == 6);
  CHECK(s.distinct_keys == 7);  // 00 01 02 10 11 12 13
  CHECK(s.layers_used == 2);
  CHECK(s.max_group == 2);
  CHECK(s.working_set == 4);
  const k3::TraceStats c = k3::trace_stats(chunked_trace());
  CHECK(c.groups == 3);
  CHECK(c.tokens == 4);
  // Two layers, a chunk of tokens 0-1 then token 2: per layer the chunk lists token 0's
  // experts, then token 1's. Forwards: 3 tokens, not the 5 position changes.
  k3::Trace two;
  two.header.layers = 2;
  two.header.experts_per_layer = 4;
  two.header.top_k = 2;
  const std::uint32_t rec[][4] = {{0, 0, 0, 1}, {0, 0, 1, 0}, {1, 0, 2, 0}, {1, 0, 3, 0}, {0, 1, 0, 1}, {0, 1, 1, 0},
                                  {1, 1, 2, 0}, {1, 1, 3, 0}, {2, 0, 0, 1}, {2, 0, 1, 0}, {2, 1, 0, 1}, {2, 1, 1, 0}};
  for (const auto& r : rec)  // {position, layer, expert, starts a group}
    two.records.push_back({r[0], static_cast<std::uint16_t>(r[1]), static_cast<std::uint16_t>(r[2]), r[3] != 0});
  CHECK(k3::trace_stats(two).tokens == 3);
  CHECK(k3::trace_stats(two).groups == 4);
  CHECK(k3::trace_stats(two).max_group == 4);
  CHECK(c.max_group == 3);  // group 0: experts 0 1 2
}

TEST_CASE("sim: a group that spans layers is refused", "[sim]") {
  k3::Trace t = hand_trace();
  t.records[2].starts_group = false;  // (token 0, layer 1) would join the layer-0 group
  CHECK_THROWS_WITH(k3::Replay(t), Catch::Contains("record 2") && Catch::Contains("layer 0"));
}

namespace {
// Breaks the contract on purpose: always offers the first key it ever saw.
class StubbornPolicy final : public k3::sdk::CachePolicy {
 public:
  k3::sdk::Status reset(std::uint64_t) noexcept override { return {}; }
  void on_access(k3::sdk::ExpertKey k, std::uint64_t seq) noexcept override {
    if (seq == 0) first_ = k;
  }
  void on_insert(k3::sdk::ExpertKey) noexcept override {}
  void on_remove(k3::sdk::ExpertKey) noexcept override {}
  k3::sdk::Status choose_victim(k3::sdk::ExpertKey, const k3::sdk::VictimQuery&,
                                k3::sdk::ExpertKey& v) noexcept override {
    v = first_;
    return {};
  }
  [[nodiscard]] bool wants_future() const noexcept override { return false; }
  k3::sdk::Status set_future(std::span<const k3::sdk::ExpertKey>) noexcept override { return {}; }

 private:
  k3::sdk::ExpertKey first_;
};
}  // namespace

TEST_CASE("sim: a victim that is leased or not resident is an error naming the policy", "[sim]") {
  const k3::Replay replay(hand_trace());
  StubbornPolicy p;
  // Capacity 3: group (10 11): 11 needs a victim; the policy offers 00 (resident,
  // evictable). Group (00 02): 00 is then a miss, and the policy offers 00 again: not resident.
  CHECK_THROWS_WITH(replay.run(p, "stubborn", 3),
                    Catch::Contains("stubborn at 3 slots") && Catch::Contains("not resident"));
  // No slot at all: refused up front.
  CHECK_THROWS_AS(replay.run(p, "stubborn", 0), k3::UsageError);
}

TEST_CASE("sim: capacities in slots, GB and working sets", "[sim]") {
  using k3::capacity_slots;
  using k3::parse_capacity;
  // The C99 engine's table: 64 GB and 8 GB of 17,547,264-byte experts = 3647 and 455 slots.
  CHECK(capacity_slots(parse_capacity("64GB"), k3::kK3ExpertBytes, 1472) == 3647);
  CHECK(capacity_slots(parse_capacity("8gb"), k3::kK3ExpertBytes, 1472) == 455);
  CHECK(capacity_slots(parse_capacity("3647"), k3::kK3ExpertBytes, 1472) == 3647);
  CHECK(capacity_slots(parse_capacity("2x"), k3::kK3ExpertBytes, 1472) == 2944);
  CHECK(capacity_slots(parse_capacity("0.5x"), k3::kK3ExpertBytes, 1472) == 736);
  for (const char* bad : {"", "abc", "-3", "1.5", "12 GB", "GB", "x", "3e", "0"})
    CHECK_THROWS_AS(parse_capacity(bad), k3::UsageError);
  CHECK_THROWS_WITH(capacity_slots(parse_capacity("0.001GB"), k3::kK3ExpertBytes, 1472),
                    Catch::Contains("less than one slot"));
}
