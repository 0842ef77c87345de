// Cache policy `lru` through the plugin host: hand-computed sequences, leases, reset,
// removal, and agreement with a naive timestamp LRU on a random workload.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <random>

#include <k3/cache_prefetch.hpp>
#include <k3/error.hpp>

#include "cache_support.hpp"

using k3::sdk::ExpertKey;
using k3::sdk::StatusCode;
using k3test::key;

namespace {

/// Drives a policy the way the host does (sdk/k3/cache_policy.hpp event order).
struct Driver {
  k3::sdk::CachePolicy& policy;
  std::uint64_t capacity;
  k3test::HostView view;
  std::uint64_t seq = 0;

  Driver(k3::sdk::CachePolicy& p, std::uint64_t cap) : policy(p), capacity(cap) { REQUIRE(policy.reset(cap).ok()); }

  /// One request; returns the key evicted to make room, if any.
  std::optional<ExpertKey> request(ExpertKey k) {
    policy.on_access(k, seq++);
    if (view.resident.count(k.packed()) != 0) return std::nullopt;
    std::optional<ExpertKey> evicted;
    if (view.resident.size() >= capacity) {
      ExpertKey victim{};
      const k3::sdk::Status st = policy.choose_victim(k, view, victim);
      REQUIRE(st.ok());
      REQUIRE(view.evictable(victim));
      evict(victim);
      evicted = victim;
    }
    insert(k);
    return evicted;
  }
  void insert(ExpertKey k) {
    policy.on_insert(k);
    view.resident.insert(k.packed());
  }
  void evict(ExpertKey k) {
    policy.on_remove(k);
    view.resident.erase(k.packed());
  }
  /// The policy's victim for the current state, or nullopt if it says not_found.
  std::optional<ExpertKey> victim() {
    ExpertKey v{};
    const k3::sdk::Status st = policy.choose_victim(key(99, 99), view, v);
    if (st.code == StatusCode::not_found) return std::nullopt;
    REQUIRE(st.ok());
    return v;
  }
};

const ExpertKey A = key(0, 1), B = key(0, 2), C = key(1, 1), D = key(1, 2), E = key(2, 0);

}  // namespace

TEST_CASE("lru loads through the plugin host with no parameters and no future", "[cache][lru]") {
  const auto policy = k3test::cache_policy("lru");
  REQUIRE(policy);
  CHECK_FALSE(policy->wants_future());
  CHECK(policy->set_future({}).code == StatusCode::unsupported);
  CHECK(policy->reset(0).code == StatusCode::invalid_argument);
  CHECK(policy->reset(1).ok());
  std::vector<std::string> unknown;
  REQUIRE(k3test::plugin_host().create_cache("lru", {{"capacity", "3"}}, &unknown));
  CHECK(unknown == std::vector<std::string>{"capacity"});
  CHECK_THROWS_AS(k3test::plugin_host().create_cache("lru", {{"capacity", "3"}}), k3::UsageError);
}

TEST_CASE("lru evicts the least recently accessed key (hand-computed sequence)", "[cache][lru]") {
  const auto policy = k3test::cache_policy("lru");
  Driver d(*policy, 3);
  // Recency order, oldest first, after each step:
  CHECK_FALSE(d.request(A));  // A
  CHECK_FALSE(d.request(B));  // A B
  CHECK_FALSE(d.request(C));  // A B C
  CHECK_FALSE(d.request(A));  // B C A        (hit)
  CHECK(d.request(D) == B);   // C A D        (B was oldest)
  CHECK_FALSE(d.request(C));  // A D C        (hit)
  CHECK(d.request(E) == A);   // D C E
  CHECK(d.request(A) == D);   // C E A
  CHECK_FALSE(d.request(E));  // C A E
  CHECK(d.request(B) == C);   // A E B
  CHECK(d.victim() == A);
}

TEST_CASE("lru keeps layers apart: the same expert index in two layers is two keys", "[cache][lru]") {
  const auto policy = k3test::cache_policy("lru");
  Driver d(*policy, 2);
  d.request(key(0, 7));
  d.request(key(1, 7));
  d.request(key(0, 7));  // hit on layer 0 only
  CHECK(d.request(key(2, 7)) == key(1, 7));
}

TEST_CASE("lru skips leased keys and reports not_found when all are leased", "[cache][lru]") {
  const auto policy = k3test::cache_policy("lru");
  Driver d(*policy, 3);
  d.request(A);
  d.request(B);
  d.request(C);  // A B C
  d.view.leased = {A.packed()};
  CHECK(d.victim() == B);
  d.view.leased = {A.packed(), B.packed()};
  CHECK(d.victim() == C);
  d.view.leased = {A.packed(), B.packed(), C.packed()};
  CHECK_FALSE(d.victim());
  d.view.leased.clear();
  CHECK(d.victim() == A);  // asking did not change the order
  // The policy only ever asks about keys it holds.
  for (const ExpertKey k : d.view.asked) CHECK(d.view.resident.count(k.packed()) == 1);
}

TEST_CASE("lru reset forgets every key", "[cache][lru]") {
  const auto policy = k3test::cache_policy("lru");
  Driver d(*policy, 2);
  d.request(A);
  d.request(B);
  REQUIRE(policy->reset(2).ok());
  // After reset the policy holds nothing, even if asked with a view that would allow anything.
  d.view.resident = {A.packed(), B.packed(), C.packed()};
  CHECK_FALSE(d.victim());
  d.view.resident.clear();
  d.request(C);
  d.request(A);
  CHECK(d.request(D) == C);
}

TEST_CASE("lru on_remove drops any key, wherever it is in the order", "[cache][lru]") {
  const auto policy = k3test::cache_policy("lru");
  Driver d(*policy, 5);
  for (ExpertKey k : {A, B, C, D, E}) d.request(k);  // A B C D E
  d.evict(C);                                        // middle
  CHECK(d.victim() == A);
  d.evict(A);  // oldest
  CHECK(d.victim() == B);
  d.evict(E);                      // newest
  policy->on_remove(key(42, 42));  // unknown: ignored
  d.request(A);                    // B D A
  d.request(B);                    // D A B (hit)
  CHECK(d.victim() == D);
  d.evict(D);
  d.evict(A);
  d.evict(B);
  CHECK_FALSE(d.victim());
}

TEST_CASE("lru: an access without insert changes nothing, an insert counts as most recent", "[cache][lru]") {
  const auto policy = k3test::cache_policy("lru");
  Driver d(*policy, 3);
  d.request(A);
  d.request(B);
  policy->on_access(C, 100);  // a miss the host has not inserted (yet)
  d.view.resident.insert(C.packed());
  d.view.leased = {A.packed(), B.packed()};
  CHECK_FALSE(d.victim());  // C is not known to the policy, so it is never offered
  d.view.leased.clear();
  d.view.resident.erase(C.packed());
  d.insert(C);   // a prefetch: inserted without an access
  d.request(A);  // B C A
  CHECK(d.victim() == B);
  d.insert(B);  // inserting a resident key again refreshes it: C A B
  CHECK(d.victim() == C);
}

TEST_CASE("lru listens to prefetches: a prefetched key ranks just below the newest key", "[cache][lru]") {
  const auto policy = k3test::cache_policy("lru");
  // The host finds the optional capability by dynamic_cast, across the plugin library.
  auto* listener = dynamic_cast<k3::sdk::CachePrefetchListener*>(policy.get());
  REQUIRE(listener != nullptr);
  Driver d(*policy, 4);
  d.request(A);
  d.request(B);              // B A
  d.insert(C);               // C B A
  listener->on_prefetch(C);  // B C A: the newest requested key stays in front
  d.insert(D);
  listener->on_prefetch(D);  // B D C A
  CHECK(d.victim() == A);
  d.evict(A);
  CHECK(d.victim() == C);
  d.evict(C);
  CHECK(d.victim() == D);
  d.request(D);  // a prefetched key's request makes it the newest: D B
  CHECK(d.victim() == B);
  listener->on_prefetch(E);  // not resident: ignored
  CHECK(d.victim() == B);
}

TEST_CASE("lru matches a naive timestamp LRU on a random workload with leases", "[cache][lru]") {
  const auto policy = k3test::cache_policy("lru");
  for (std::uint64_t capacity : {1, 2, 7, 40}) {
    Driver d(*policy, capacity);
    std::map<std::uint64_t, std::uint64_t> last_use;  // resident key -> time of last access or insert
    std::uint64_t now = 0;
    std::mt19937_64 rng(capacity);
    std::uniform_int_distribution<std::uint32_t> layer(0, 3), expert(0, 20);
    std::bernoulli_distribution lease(0.25);
    for (int step = 0; step < 5000; ++step) {
      const ExpertKey k = key(layer(rng), expert(rng));
      ++now;
      if (last_use.count(k.packed()) != 0) {
        d.request(k);
        last_use[k.packed()] = now;
        continue;
      }
      policy->on_access(k, d.seq++);  // the host reports every request first, hit or miss
      if (last_use.size() >= capacity) {
        d.view.leased.clear();
        for (const auto& [resident, t] : last_use)
          if (lease(rng)) d.view.leased.insert(resident);
        // Naive expectation: the evictable key with the oldest use.
        std::optional<std::uint64_t> expected;
        for (const auto& [resident, t] : last_use)
          if (d.view.leased.count(resident) == 0 && (!expected || t < last_use[*expected])) expected = resident;
        const auto got = d.victim();
        INFO("capacity " << capacity << ", step " << step);
        REQUIRE(got.has_value() == expected.has_value());
        if (!got) continue;  // all leased: the host would wait; this request is skipped
        REQUIRE(got->packed() == *expected);
        d.evict(*got);
        last_use.erase(*expected);
        d.view.leased.clear();
      }
      d.insert(k);
      last_use[k.packed()] = now;
    }
  }
}
