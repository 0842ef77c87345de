// Router-lookahead prefetch (docs/cache.md, "Router-lookahead prefetch"): the output bits
// never change with it on, at tight and roomy budgets, depths 1 and 2, with and without a
// byte limit, across kernel sets and thread counts; on the expert cache itself, a
// prefetched expert is a prefetch hit and never a hit, the policy hears on_insert then
// on_prefetch and no on_access, a prefetch never evicts a leased key or one the layer being
// computed requested, and the byte limit holds.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include <k3/cache_prefetch.hpp>
#include <k3/checkpoint.hpp>
#include <k3/geometry.hpp>
#include <k3/model.hpp>
#include <k3/plan.hpp>
#include <k3/plugin_host.hpp>

#include "model/tensor_table.hpp"
#include "streaming/expert_cache.hpp"
#include "test_models.hpp"

namespace {

k3::test::ScratchCleanup cleanup;

using k3::sdk::ExpertKey;

// ---------------------------------------------------------------------------------------
// Model level: bits.

struct Outcome {
  std::vector<float> logits;
  std::vector<std::uint32_t> ids;
  k3::StreamStats stats;
  bool streaming = false;
};

/// Prefill in chunks of 3 (all positions), then greedy decode `steps` tokens.
Outcome run(k3::PluginHost& host, const k3::ModelSettings& s, int steps) {
  k3::Model model(k3::test::test_model("tiny").string(), host, s);
  Outcome r;
  r.streaming = model.streaming();
  k3::Session session(model, 64);
  const std::uint32_t prompt[] = {1, 7, 42, 3, 99, 5, 250};
  std::vector<float> logits;
  for (std::size_t at = 0; at < std::size(prompt); at += 3) {
    const std::size_t n = std::min<std::size_t>(3, std::size(prompt) - at);
    session.feed({prompt + at, n}, true, logits);
    r.logits.insert(r.logits.end(), logits.begin(), logits.end());
  }
  const std::size_t V = static_cast<std::size_t>(model.config().vocab_size);
  for (int i = 0; i < steps; ++i) {
    const float* last = r.logits.data() + r.logits.size() - V;
    const auto next = static_cast<std::uint32_t>(std::max_element(last, last + V) - last);
    r.ids.push_back(next);
    session.feed({&next, 1}, false, logits);
    r.logits.insert(r.logits.end(), logits.begin(), logits.end());
  }
  r.stats = model.stream_stats();
  return r;
}

/// tiny with `pin_share` of its trunk pinned and `slots` expert slots.
k3::ModelSettings streamed(double pin_share, std::uint64_t slots, const std::string& kernels, int threads) {
  k3::ModelSettings s;
  s.kernels = kernels;
  s.threads = threads;
  s.memory.context = 64;
  k3::PlanInputs probe = s.memory;
  probe.available = 1ull << 40;
  const auto full = k3::plan_memory(k3::load_geometry("tiny").config, probe);
  const std::uint64_t trunk = std::accumulate(full.layer_bytes.begin(), full.layer_bytes.end(), std::uint64_t{0});
  s.memory.trunk_gb = static_cast<double>(trunk) * pin_share / 1e9;
  s.memory.expert_cache_gb = (static_cast<double>(slots) + 0.5) * static_cast<double>(full.expert_slot_bytes) / 1e9;
  return s;
}

// ---------------------------------------------------------------------------------------
// Cache level: events and counters.

/// First in, first out, listening to prefetches; records every event.
class RecordingPolicy final : public k3::sdk::CachePolicy, public k3::sdk::CachePrefetchListener {
 public:
  std::vector<std::string> events;
  std::vector<ExpertKey> order;  ///< resident keys, oldest first

  k3::sdk::Status reset(std::uint64_t) noexcept override {
    order.clear();
    return k3::sdk::Status::success();
  }
  void on_access(ExpertKey k, std::uint64_t) noexcept override { events.push_back("access " + name(k)); }
  void on_insert(ExpertKey k) noexcept override {
    events.push_back("insert " + name(k));
    order.push_back(k);
  }
  void on_remove(ExpertKey k) noexcept override {
    events.push_back("remove " + name(k));
    order.erase(std::remove(order.begin(), order.end(), k), order.end());
  }
  void on_prefetch(ExpertKey k) noexcept override { events.push_back("prefetch " + name(k)); }
  k3::sdk::Status choose_victim(ExpertKey, const k3::sdk::VictimQuery& q, ExpertKey& victim) noexcept override {
    for (const ExpertKey k : order)
      if (q.evictable(k)) {
        victim = k;
        return k3::sdk::Status::success();
      }
    return k3::sdk::Status::error(k3::sdk::StatusCode::not_found, "all leased");
  }
  [[nodiscard]] bool wants_future() const noexcept override { return false; }
  k3::sdk::Status set_future(std::span<const ExpertKey>) noexcept override {
    return k3::sdk::Status::error(k3::sdk::StatusCode::unsupported, "no");
  }
  static std::string name(ExpertKey k) { return std::to_string(k.layer) + "." + std::to_string(k.expert); }
  [[nodiscard]] std::size_t count(const std::string& e) const {
    return static_cast<std::size_t>(std::count(events.begin(), events.end(), e));
  }
};

/// An expert cache of `slots` slots over the tiny checkpoint, with a RecordingPolicy.
struct CacheRig {
  k3::PluginHost host;
  std::shared_ptr<k3::sdk::StorageBackend> storage = host.create_storage("posix", {});
  std::string uri = k3::test::test_model("tiny").string();
  k3::ModelConfig config = k3::read_model_config(*storage, uri);
  k3::CheckpointIndex index = k3::CheckpointIndex::open(*storage, uri);
  std::shared_ptr<RecordingPolicy> policy = std::make_shared<RecordingPolicy>();
  k3::streaming::StreamCounters counters;
  std::unique_ptr<k3::streaming::ExpertCache> cache;

  explicit CacheRig(std::uint64_t slots) {
    k3::PlanInputs probe;
    probe.available = 1ull << 40;
    const auto plan = k3::plan_memory(config, probe);
    cache = std::make_unique<k3::streaming::ExpertCache>(config, index, *storage, policy, nullptr, slots,
                                                         plan.expert_slot_bytes, 1, counters);
  }
  /// One serving group of `layer` for the distinct ascending `ids`, every expert awaited;
  /// the lease is kept in `lease`.
  void serve(std::uint32_t layer, std::vector<std::uint32_t> ids, k3::streaming::ExpertCache::Lease& lease) {
    cache->route(layer, ids);
    cache->request(layer, ids, lease);
    for (std::size_t i = 0; i < ids.size(); ++i) REQUIRE(lease.wait_one(i).w1.packed != nullptr);
  }
  /// The bytes of one expert as the cache reads it (its six tensors).
  [[nodiscard]] std::uint64_t expert_bytes() const {
    std::uint64_t n = 0;
    k3::table::for_each_expert_tensor(config, config.first_k_dense_replace, 0,
                                      [&](const k3::table::Entry& t, const auto&) {
      n += k3::table::require(index, t).nbytes;
    });
    return n;
  }
};

/// Prefetch on (depths 1 and 2, with and without a byte limit) against off, at a
/// laptop-like budget (some layers pinned, a small cache), an ultra-like one (nothing
/// pinned: routers only from the ring's read-ahead; top-k slots) and a roomy one.
void check_same_bits(const std::string& kernels, int threads) {
  k3::PluginHost host;
  struct Budget {
    double pin_share;
    std::uint64_t slots;
  };
  std::uint64_t prefetched = 0, prefetch_hits = 0;
  for (const Budget b : {Budget{0.4, 5}, Budget{0.0, 2}, Budget{1.0, 12}}) {
    {
      const k3::ModelSettings off = streamed(b.pin_share, b.slots, kernels, threads);
      const Outcome base = run(host, off, 5);
      REQUIRE(base.streaming);
      CHECK(base.stats.prefetch_experts == 0);
      CHECK(base.stats.lookahead_predicted == 0);
      for (const std::size_t depth : {1u, 2u}) {
        for (const double mb : {0.0, 0.001}) {
          if (depth == 1 && mb != 0.0) continue;
          CAPTURE(b.pin_share, b.slots, kernels, threads, depth, mb);
          k3::ModelSettings on = off;
          on.prefetch_depth = depth;
          on.prefetch_bytes_per_token = static_cast<std::uint64_t>(mb * 1e6);
          const Outcome r = run(host, on, 5);
          REQUIRE(r.logits.size() == base.logits.size());
          CHECK(r.ids == base.ids);
          CHECK(std::memcmp(r.logits.data(), base.logits.data(), r.logits.size() * sizeof(float)) == 0);
          // Same requests; a request is a hit, a prefetch hit or a miss, never two of them.
          CHECK(r.stats.expert_requests == base.stats.expert_requests);
          CHECK(r.stats.expert_hits + r.stats.prefetch_hits <= r.stats.expert_requests);
          CHECK(r.stats.prefetch_used <= r.stats.prefetch_experts);
          CHECK(r.stats.lookahead_correct <= std::min(r.stats.lookahead_predicted, r.stats.lookahead_routed));
          CHECK(r.stats.expert_failures.empty());
          prefetched += r.stats.prefetch_experts;
          prefetch_hits += r.stats.prefetch_hits;
        }
      }
    }
  }
  // The runs did prefetch, and some prefetches were used (else this tested nothing).
  CHECK(prefetched > 0);
  CHECK(prefetch_hits > 0);
}

}  // namespace

TEST_CASE("prefetch: output bits are the same on and off across budgets, depths and byte limits (scalar, 2 threads)",
          "[prefetch]") {
  check_same_bits("scalar", 2);
}

TEST_CASE(
    "prefetch: output bits are the same on and off across budgets, depths and byte limits (auto kernels, 1 thread)",
    "[prefetch]") {
  check_same_bits("auto", 1);
}

TEST_CASE("prefetch: a prefetched expert is a prefetch hit, never a hit, the policy hears insert then prefetch",
          "[prefetch]") {
  CacheRig rig(3);
  rig.cache->set_prefetch(1, 0);
  k3::streaming::ExpertCache::Lease held;
  rig.serve(1, {0}, held);  // (1,0) leased while layer 1 computes
  const std::uint32_t guess[] = {5, 6, 7};
  rig.cache->prefetch(2, guess, 1);
  // Two free slots take 5 and 6; 7 finds no victim: (1,0) is leased and requested by the
  // layer being computed, 5 and 6 are prefetches not yet used.
  CHECK(rig.counters.prefetch_experts == 2);
  CHECK(rig.counters.prefetch_bytes == 2 * rig.expert_bytes());
  const std::vector<std::string> expected = {"access 1.0",   "insert 1.0", "insert 2.5",
                                             "prefetch 2.5", "insert 2.6", "prefetch 2.6"};
  CHECK(rig.policy->events == expected);
  held.reset();

  k3::streaming::ExpertCache::Lease lease;
  rig.serve(2, {1, 5}, lease);  // 5 was prefetched, 1 is a miss
  CHECK(rig.counters.expert_requests == 3);
  CHECK(rig.counters.expert_hits == 0);
  CHECK(rig.counters.prefetch_hits == 1);
  CHECK(rig.counters.prefetch_used == 1);
  CHECK(rig.counters.prefetch_used_bytes == rig.expert_bytes());
  // The prediction {5,6,7} against the routing {1,5}.
  CHECK(rig.counters.lookahead_predicted == 3);
  CHECK(rig.counters.lookahead_routed == 2);
  CHECK(rig.counters.lookahead_correct == 1);
  lease.reset();
  rig.serve(2, {5}, lease);  // its second request is an ordinary hit
  CHECK(rig.counters.expert_hits == 1);
  CHECK(rig.counters.prefetch_hits == 1);
  CHECK(rig.policy->count("access 2.6") == 0);
  CHECK(rig.policy->count("access 2.7") == 0);
  CHECK(rig.policy->count("prefetch 2.7") == 0);
}

TEST_CASE("prefetch: evicts only keys no computation needs, within the byte limit", "[prefetch]") {
  CacheRig rig(3);
  k3::streaming::ExpertCache::Lease lease;
  rig.serve(1, {0, 1}, lease);
  lease.reset();
  rig.serve(1, {2}, lease);  // the layer being computed requested 2 (its lease is kept)
  rig.cache->set_prefetch(1, 0);
  const std::uint32_t guess[] = {3, 4, 5};
  rig.cache->prefetch(2, guess, 1);
  // No free slot: 0 and 1 go (oldest first); 2 is leased, and would be kept anyway.
  CHECK(rig.counters.prefetch_experts == 2);
  CHECK(rig.policy->count("remove 1.0") == 1);
  CHECK(rig.policy->count("remove 1.1") == 1);
  CHECK(rig.policy->count("remove 1.2") == 0);
  lease.reset();
  // Unleased now, but still the current layer's request: not a prefetch victim.
  const std::uint32_t more[] = {6};
  rig.cache->prefetch(3, more, 1);
  CHECK(rig.counters.prefetch_experts == 2);
  CHECK(rig.policy->count("remove 1.2") == 0);

  // The byte limit: per prediction mb_per_token × tokens ÷ MoE layers.
  CacheRig small(6);
  const auto moe_layers =
      static_cast<std::uint64_t>(small.config.num_hidden_layers - small.config.first_k_dense_replace);
  small.cache->set_prefetch(1, moe_layers * small.expert_bytes());  // one expert per token and layer
  const std::uint32_t three[] = {1, 2, 3};
  small.cache->prefetch(2, three, 1);
  CHECK(small.counters.prefetch_experts == 1);
  small.cache->prefetch(3, three, 2);
  CHECK(small.counters.prefetch_experts == 3);
  small.cache->set_prefetch(0, 0);  // off: a hint is ignored
  small.cache->prefetch(4, three, 1);
  CHECK(small.counters.prefetch_experts == 3);
}

TEST_CASE("prefetch: router copies predict streamed layers no exact router reaches, and change no output bit",
          "[prefetch][router_copy]") {
  // Nothing pinned and a one-slot ring: no exact router is ever at hand for the next layer,
  // so only the resident copies (cache.prefetch.router int8, int4) can predict anything.
  k3::PluginHost host;
  k3::ModelSettings exact = streamed(0.0, 2, "scalar", 1);
  exact.memory.trunk_gb = 0.0;
  exact.prefetch_depth = 1;
  exact.memory.router_copy = k3::PlanInputs::RouterCopy::exact;
  k3::Model probe(k3::test::test_model("tiny").string(), host, exact);
  REQUIRE(probe.plan().pinned_count == 0);
  REQUIRE(probe.plan().ring_slots == 1);
  CHECK(probe.plan().router_copy_bytes == 0);
  const Outcome base = run(host, exact, 5);
  REQUIRE(base.streaming);
  std::uint64_t previous_bytes = 0;
  for (const auto mode : {k3::PlanInputs::RouterCopy::int4, k3::PlanInputs::RouterCopy::int8}) {
    const int bits = mode == k3::PlanInputs::RouterCopy::int8 ? 8 : 4;
    CAPTURE(bits);
    k3::ModelSettings with = exact;
    with.memory.router_copy = mode;
    const k3::ModelConfig& c = probe.config();
    {
      k3::Model m(k3::test::test_model("tiny").string(), host, with);
      const k3::MemoryPlan& p = m.plan();
      std::size_t moe = 0;
      for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) moe += c.is_dense(i) ? 0 : 1;
      CHECK(p.router_copy_bits == bits);
      CHECK(p.router_copies == moe);
      CHECK(p.router_copy_bytes == moe * k3::router_copy_bytes(static_cast<std::uint64_t>(c.num_experts),
                                                               static_cast<std::uint64_t>(c.hidden_size), bits));
      CHECK(p.router_copy_bytes > previous_bytes);
      CHECK(p.total == probe.plan().total + p.router_copy_bytes);
      CHECK(p.table().find("router copies") != std::string::npos);
      previous_bytes = p.router_copy_bytes;
    }
    const Outcome r = run(host, with, 5);
    CHECK(r.ids == base.ids);
    REQUIRE(r.logits.size() == base.logits.size());
    CHECK(std::memcmp(r.logits.data(), base.logits.data(), r.logits.size() * sizeof(float)) == 0);
    CHECK(r.stats.expert_requests == base.stats.expert_requests);
    // The copies predicted where the exact routers could not, and some guesses were right.
    CHECK(base.stats.lookahead_predicted == 0);
    CHECK(r.stats.lookahead_predicted > 0);
    CHECK(r.stats.lookahead_correct > 0);
    CHECK(r.stats.lookahead_correct <= std::min(r.stats.lookahead_predicted, r.stats.lookahead_routed));
  }
  // Without a lookahead the plan holds no copy, whatever cache.prefetch.router says.
  k3::ModelSettings off = exact;
  off.prefetch_depth = 0;
  off.memory.router_copy = k3::PlanInputs::RouterCopy::int8;
  k3::Model none(k3::test::test_model("tiny").string(), host, off);
  CHECK(none.plan().router_copy_bytes == 0);
}

TEST_CASE("prefetch: router copies auto take the most precise copy that adds at most a sixteenth to the plan",
          "[prefetch][router_copy]") {
  const k3::ModelConfig c = k3::load_geometry("k3").config;
  k3::PlanInputs in;
  in.available = 1ull << 40;
  in.context = 4096;
  in.trunk_gb = 0.0;  // every MoE layer streamed
  in.expert_cache_gb = 4.0;
  std::size_t moe = 0;
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) moe += c.is_dense(i) ? 0 : 1;
  const auto E = static_cast<std::uint64_t>(c.hidden_size), NE = static_cast<std::uint64_t>(c.num_experts);
  const std::uint64_t int8 = moe * k3::router_copy_bytes(NE, E, 8), int4 = moe * k3::router_copy_bytes(NE, E, 4);
  in.router_copy = k3::PlanInputs::RouterCopy::exact;
  const std::uint64_t rest_small = k3::plan_memory(c, in).total;
  in.router_copy = k3::PlanInputs::RouterCopy::automatic;
  const k3::MemoryPlan small = k3::plan_memory(c, in);
  const int want_small = int8 <= rest_small / 16 ? 8 : int4 <= rest_small / 16 ? 4 : 0;
  CHECK(small.router_copy_auto);
  CHECK(small.router_copy_bits == want_small);
  // A larger expert cache leaves room for int8.
  in.expert_cache_gb = 80.0;
  in.router_copy = k3::PlanInputs::RouterCopy::exact;
  const std::uint64_t rest_large = k3::plan_memory(c, in).total;
  in.router_copy = k3::PlanInputs::RouterCopy::automatic;
  const k3::MemoryPlan large = k3::plan_memory(c, in);
  REQUIRE(int8 <= rest_large / 16);
  CHECK(large.router_copy_bits == 8);
  CHECK(large.router_copy_bytes == int8);
  CHECK(large.total == rest_large + int8);
  // Everything pinned: no layer needs a copy.
  in.trunk_gb = 1e6;
  CHECK(k3::plan_memory(c, in).router_copy_bytes == 0);
}
