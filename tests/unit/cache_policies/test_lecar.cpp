// LeCaR against hand-computed sequences. Clock: one tick per request. Each choose_victim
// draws u from splitmix64 (state = seed, one step per call) and follows LRU when u < w_lru.
#include <cmath>

#include "policy_driver.hpp"

using policy_test::Driver;

namespace {
enum : std::uint32_t { A = 1, B, C, D };

/// The n-th draw (from 1) of the policy's generator for `seed`, as documented in its README.
double draw(std::uint64_t seed, int n) {
  double u = 0;
  for (int i = 0; i < n; ++i) {
    std::uint64_t z = (seed += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    u = static_cast<double>(z >> 11) * 0x1.0p-53;
  }
  return u;
}
}  // namespace

TEST_CASE("lecar: when LRU and LFU pick the same key, that key goes whatever the draw", "[lecar]") {
  // Capacity 3: A B B C C D. At D: A (1 use, t1), B (2, t3), C (2, t5): oldest and
  // least used is A for both experts.
  k3::PluginHost host;
  for (const char* seed : {"1", "2", "3", "4", "5"}) {
    Driver d(host, "lecar", 3, {{"seed", seed}});
    d.run({A, B, B, C, C, D});
    CHECK(d.victims() == std::vector<std::uint32_t>{A});
  }
}

TEST_CASE("lecar: experts disagree and the seeded draw decides", "[lecar]") {
  // Capacity 2: A A B C. At C: A (2 uses, t2), B (1 use, t3): LRU says A, LFU says B.
  k3::PluginHost host;
  bool saw_lru = false, saw_lfu = false;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    Driver d(host, "lecar", 2, {{"seed", std::to_string(seed)}});
    d.run({A, A, B, C});
    const bool lru = draw(seed, 1) < 0.5;
    CHECK(d.victims() == std::vector<std::uint32_t>{lru ? A : B});
    (lru ? saw_lru : saw_lfu) = true;
  }
  CHECK(saw_lru);
  CHECK(saw_lfu);
}

TEST_CASE("lecar: a miss on a key the LFU expert evicted moves weight to LRU", "[lecar]") {
  // Capacity 2, learning_rate 10: A A B C B.
  //   C (t4): LRU says A, LFU says B; a seed whose first draw is >= 0.5 follows LFU: B goes.
  //   B (t5): B was evicted by LFU one request ago: w_lru = R / (R + 1), R = exp(10 x d),
  //           d = 0.005^(1/2) (the discount per request at capacity 2). Residents A (2 uses,
  //           t2) and C (1 use, t4): LRU says A, LFU says C; the second draw u2 decides.
  // With a seed where 0.5 <= u2 < w_lru, the learning policy follows LRU (A) and a policy
  // without HISTORY (history_ratio 0: nothing learned, w_lru stays 0.5) follows LFU (C).
  const double w_lru = [] {
    const double r = std::exp(10.0 * std::pow(0.005, 0.5));
    return r / (r + 1.0);
  }();
  REQUIRE(w_lru > 0.6);
  std::uint64_t seed = 1;
  while (!(draw(seed, 1) >= 0.5 && draw(seed, 2) >= 0.5 && draw(seed, 2) < w_lru)) ++seed;
  const std::string s = std::to_string(seed);
  k3::PluginHost host;
  Driver learning(host, "lecar", 2, {{"seed", s}, {"learning_rate", "10"}});
  learning.run({A, A, B, C, B});
  CHECK(learning.victims() == std::vector<std::uint32_t>{B, A});
  Driver fixed(host, "lecar", 2, {{"seed", s}, {"learning_rate", "10"}, {"history_ratio", "0"}});
  fixed.run({A, A, B, C, B});
  CHECK(fixed.victims() == std::vector<std::uint32_t>{B, C});
}

TEST_CASE("lecar: a key back from HISTORY gets its count back", "[lecar]") {
  // Capacity 2, half-life 1000 x capacity (counts barely decay): A A A B B B C A D.
  //   C (t7): A (3 uses, t1-t3), B (3 uses, t4-t6): both experts say A (agreed: no lesson).
  //   A (t8): B (3, t6), C (1, t7): LRU says B, LFU says C; a seed whose 2nd draw is
  //           >= 0.5 follows LFU: C goes. A is back with its 3 uses, plus this one: 4.
  //   D (t9): B (3 uses, t6) and A (4 uses, t8): LRU says B, LFU says B. B goes.
  // Had A come back with a count of 1, LFU would say A, and a 3rd draw >= 0.5 would evict it.
  std::uint64_t seed = 1;
  while (!(draw(seed, 2) >= 0.5 && draw(seed, 3) >= 0.5)) ++seed;
  k3::PluginHost host;
  Driver d(host, "lecar", 2, {{"halflife", "1000"}, {"seed", std::to_string(seed)}});
  d.run({A, A, A, B, B, B, C, A, D});
  CHECK(d.victims() == std::vector<std::uint32_t>{A, C, B});
}

TEST_CASE("lecar: not_found when every resident key is leased and bad parameters are refused", "[lecar]") {
  k3::PluginHost host;
  policy_test::check_not_found_when_all_leased(host, "lecar");
  CHECK_THROWS_WITH(host.create_cache("lecar", {{"learning_rate", "fast"}}), Catch::Contains("learning_rate"));
}
