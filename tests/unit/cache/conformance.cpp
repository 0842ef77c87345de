// Conformance of every cache policy on the plugin search path (lru now; s3fifo, lfu,
// sieve and belady as they land). A tiny host model drives each policy with a random
// workload in the SDK's event order (sdk/k3/cache_policy.hpp) and checks the rules a
// policy must keep whatever its ranking:
//   - a victim is resident and evictable: never leased, never pinned, never the incoming key;
//   - not_found only when no resident key is evictable, and then the host waits;
//   - the cache never holds more keys than its capacity;
//   - reset() starts over: nothing from an earlier run is ever offered again.
// Policies that want the future request stream (Belady) receive it through set_future().
#include <catch2/catch.hpp>

#include <random>
#include <set>
#include <vector>

#include "cache_support.hpp"

using k3::sdk::ExpertKey;
using k3::sdk::StatusCode;

namespace {

struct Workload {
  std::uint64_t capacity;
  std::uint32_t layers;
  std::uint32_t experts;
  double lease_probability;  // per resident key, at each eviction
  std::uint64_t seed;
  std::size_t requests = 4000;
};

/// Skewed random requests: a few hot experts per layer, like a router.
std::vector<ExpertKey> request_stream(const Workload& w) {
  std::mt19937_64 rng(w.seed);
  std::uniform_int_distribution<std::uint32_t> layer(0, w.layers - 1);
  std::geometric_distribution<std::uint32_t> hot(0.15);
  std::vector<ExpertKey> out;
  for (std::size_t i = 0; i < w.requests; ++i) out.push_back({layer(rng), hot(rng) % w.experts});
  return out;
}

struct Counters {
  std::size_t hits = 0, misses = 0, evictions = 0, waits = 0;
};

/// The host model: resident keys, pins, leases; prefetches and host-side drops mixed in.
Counters run_workload(k3::sdk::CachePolicy& policy, const std::string& name, const Workload& w) {
  const std::vector<ExpertKey> stream = request_stream(w);
  REQUIRE(policy.reset(w.capacity).ok());
  if (policy.wants_future()) REQUIRE(policy.set_future(stream).ok());

  std::mt19937_64 rng(w.seed ^ 0x5eed);
  std::bernoulli_distribution lease(w.lease_probability), prefetch(0.05), drop(0.02);
  std::uniform_int_distribution<std::uint32_t> any_layer(0, w.layers - 1), any_expert(0, w.experts - 1);
  k3test::HostView view;
  std::set<std::uint64_t> pinned;
  Counters n;

  // Makes room for `incoming` if the cache is full; false if every resident key is leased.
  auto make_room = [&](ExpertKey incoming) -> bool {
    if (view.resident.size() < w.capacity) return true;
    view.leased = pinned;
    for (auto k : view.resident)
      if (lease(rng)) view.leased.insert(k);
    ExpertKey victim{};
    const k3::sdk::Status st = policy.choose_victim(incoming, view, victim);
    INFO("policy " << name << ": " << st.detail);
    if (st.code == StatusCode::not_found) {
      REQUIRE_FALSE(view.any_evictable());
      ++n.waits;
      return false;
    }
    REQUIRE(st.ok());
    REQUIRE(view.resident.count(victim.packed()) == 1);
    REQUIRE(view.leased.count(victim.packed()) == 0);
    REQUIRE_FALSE(victim == incoming);
    policy.on_remove(victim);
    view.resident.erase(victim.packed());
    ++n.evictions;
    return true;
  };

  for (std::size_t seq = 0; seq < stream.size(); ++seq) {
    const ExpertKey k = stream[seq];
    policy.on_access(k, seq);
    if (view.resident.count(k.packed()) != 0) {
      ++n.hits;
    } else {
      ++n.misses;
      if (make_room(k)) {
        policy.on_insert(k);
        view.resident.insert(k.packed());
      }
    }
    // Pin the first key of layer 0 seen resident, to exercise pins as well as leases.
    if (pinned.empty() && k.layer == 0 && view.resident.count(k.packed()) != 0 && w.capacity > 2)
      pinned.insert(k.packed());
    if (prefetch(rng)) {
      const ExpertKey p{any_layer(rng), any_expert(rng)};
      if (view.resident.count(p.packed()) == 0 && make_room(p)) {
        policy.on_insert(p);
        view.resident.insert(p.packed());
      }
    }
    if (drop(rng) && !view.resident.empty()) {
      auto it = view.resident.begin();
      std::advance(it, static_cast<long>(rng() % view.resident.size()));
      if (pinned.count(*it) == 0) {
        policy.on_remove(ExpertKey::unpack(*it));
        view.resident.erase(it);
      }
    }
    REQUIRE(view.resident.size() <= w.capacity);
  }
  return n;
}

}  // namespace

TEST_CASE("cache policy conformance: lease, residency and capacity rules on random workloads", "[cache][conformance]") {
  const std::vector<std::string> names = k3test::cache_policy_names();
  REQUIRE_FALSE(names.empty());
  for (const std::string& name : names) {
    const auto policy = k3test::cache_policy(name);
    const Workload workloads[] = {
        {1, 2, 8, 0.0, 1},     // one slot: every miss evicts
        {4, 3, 16, 0.3, 2},    // small cache, frequent leases
        {16, 4, 64, 0.9, 3},   // leases almost everything: many waits
        {64, 8, 128, 0.1, 4},  // a larger cache
    };
    for (const Workload& w : workloads) {
      INFO("policy " << name << ", capacity " << w.capacity << ", seed " << w.seed);
      const Counters n = run_workload(*policy, name, w);
      CHECK(n.hits + n.misses == w.requests);
      CHECK(n.evictions > 0);  // the workload really exercised choose_victim
      if (w.lease_probability >= 0.9) CHECK(n.waits > 0);
    }
    // The same object again after reset, with a workload over different keys.
    const Counters again = run_workload(*policy, name, {8, 2, 32, 0.2, 5});
    CHECK(again.evictions > 0);
  }
}

TEST_CASE("cache policy conformance: every resident key leased gives not_found", "[cache][conformance]") {
  for (const std::string& name : k3test::cache_policy_names()) {
    INFO("policy " << name);
    const auto policy = k3test::cache_policy(name);
    REQUIRE(policy->reset(3).ok());
    const std::vector<ExpertKey> stream = {{0, 1}, {0, 2}, {1, 1}, {1, 2}};
    if (policy->wants_future()) REQUIRE(policy->set_future(stream).ok());
    k3test::HostView view;
    for (std::size_t i = 0; i < 3; ++i) {
      policy->on_access(stream[i], i);
      policy->on_insert(stream[i]);
      view.resident.insert(stream[i].packed());
    }
    policy->on_access(stream[3], 3);
    view.leased = view.resident;
    ExpertKey victim{};
    CHECK(policy->choose_victim(stream[3], view, victim).code == StatusCode::not_found);
    view.leased.erase(stream[1].packed());
    REQUIRE(policy->choose_victim(stream[3], view, victim).ok());
    CHECK(victim == stream[1]);  // the only evictable key
  }
}
