// nextuse against hand-computed scores. With fewer than 32 started gaps every key is scored
// from the pooled histogram: started gaps S, ended gaps per bin; a key whose next possible
// use is gap g (visits of its layer) and `first` groups away scores
//   sum over bins b >= bin(g) of ended[b] / (first + (max(mid(b), g) - g) x layers) / at_risk,
//   at_risk = S - ended gaps in bins below bin(g).
#include "policy_driver.hpp"

using policy_test::Driver;
using policy_test::key;

namespace {
// Two MoE layers (0 and 1), one expert per layer and token: the smallest cyclic model.
//   token 1: layer 0 -> A, layer 1 -> B
//   token 2: layer 0 -> A, layer 1 -> C
// Gaps: A started at token 1 and ended after 1 visit; A (again), B and C are open.
// Pool: started 4, ended[gap 1] = 1. The current layer is 1; layers = 2.
//   A (layer 0, served next: first = 1, age 0, g = 1): 1 / 1 / 4      = 0.25
//   C (layer 1, just served: first = 2, age 0, g = 1): 1 / 2 / 4      = 0.125
//   B (layer 1, missed its gap-1 reuse: g = 2, at_risk 4 - 1 = 3, no gap >= 2 seen) = 0
enum : std::uint32_t { A = 1, B = 2, C = 3 };
void two_tokens(Driver& d) {
  d.request(key(A, 0));
  d.request(key(B, 1));
  d.request(key(A, 0));
  d.request(key(C, 1));
}
}  // namespace

TEST_CASE("nextuse: scores follow the learned reuse gaps and the layer order", "[nextuse]") {
  k3::PluginHost host;
  Driver d(host, "nextuse", 8);
  two_tokens(d);
  // The victim order is the score order: B (0), then C (0.125), then A (0.25).
  const std::set<std::uint64_t> resident = {key(A, 0).packed(), key(B, 1).packed(), key(C, 1).packed()};
  std::set<std::uint64_t> leased;
  const Driver::Query q(resident, leased);
  k3::sdk::ExpertKey victim;
  REQUIRE(d.policy().choose_victim(key(9, 0), q, victim).ok());
  CHECK(victim == key(B, 1));  // its only observed reuse distance has passed
  leased.insert(key(B, 1).packed());
  REQUIRE(d.policy().choose_victim(key(9, 0), q, victim).ok());
  CHECK(victim == key(C, 1));  // just served: its layer comes back last
  leased.insert(key(C, 1).packed());
  REQUIRE(d.policy().choose_victim(key(9, 0), q, victim).ok());
  CHECK(victim == key(A, 0));
}

TEST_CASE("nextuse: with nothing learned yet it evicts the least recently accessed key", "[nextuse]") {
  k3::PluginHost host;
  Driver d(host, "nextuse", 3);
  // One layer, no key ever comes back: every score is 0 and ties go to the oldest access.
  // 1 2 3 fill; 4 evicts 1; 5 evicts 2; 6 evicts 3.
  d.run({1, 2, 3, 4, 5, 6});
  CHECK(d.victims() == std::vector<std::uint32_t>{1, 2, 3});
}

TEST_CASE("nextuse: a key seen coming back every token outlives keys seen once", "[nextuse]") {
  k3::PluginHost host;
  Driver d(host, "nextuse", 4);
  // Two layers; expert 1 of layer 0 at every token, plus a fresh expert per layer per token.
  // After a few tokens "count >= 2, last gap 1" keys have come back every time, fresh keys
  // never: key(1, 0) is never the victim, however the fresh keys come and go.
  std::uint32_t fresh = 100;
  for (int token = 0; token < 40; ++token) {
    d.request(key(1, 0));
    d.request(key(fresh++, 0));
    d.request(key(fresh++, 1));
  }
  for (const std::uint32_t v : d.victims()) CHECK(v != 1);
  CHECK(d.victims().size() >= 70);
}

TEST_CASE("nextuse: the same seed gives the same victims, and bad parameters are refused", "[nextuse]") {
  k3::PluginHost host;
  std::vector<std::uint32_t> seq;
  std::uint64_t x = 7;
  for (int i = 0; i < 600; ++i) {  // a fixed pseudo-random request stream over 40 keys
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    seq.push_back(static_cast<std::uint32_t>((x >> 33) % 40));
  }
  Driver a(host, "nextuse", 10, {{"sample", "3"}, {"seed", "5"}});
  Driver b(host, "nextuse", 10, {{"sample", "3"}, {"seed", "5"}});
  a.run(seq);
  b.run(seq);
  CHECK(a.victims() == b.victims());
  CHECK(a.victims().size() > 100);
  policy_test::check_not_found_when_all_leased(host, "nextuse");
  CHECK_THROWS_WITH(host.create_cache("nextuse", {{"sample", "0"}}), Catch::Contains("sample"));
}

TEST_CASE("nextuse: the least recently accessed keys are candidates besides the random draw", "[nextuse]") {
  // One layer: nothing is learned (every request is in the same visit), every score is 0
  // and ties go to the oldest access. With one random candidate and the oldest key as a
  // candidate too, the victim is always the least recently used key: 1, 2, ..., 20.
  // Without the oldest key, the single random candidate decides, and it is not always the
  // least recently used one (4 resident keys, 20 evictions).
  std::vector<std::uint32_t> seq;
  for (std::uint32_t e = 1; e <= 24; ++e) seq.push_back(e);
  std::vector<std::uint32_t> lru_order;
  for (std::uint32_t e = 1; e <= 20; ++e) lru_order.push_back(e);
  k3::PluginHost host;
  Driver with_oldest(host, "nextuse", 4, {{"sample", "1"}, {"oldest", "1"}});
  with_oldest.run(seq);
  CHECK(with_oldest.victims() == lru_order);
  Driver random_only(host, "nextuse", 4, {{"sample", "1"}, {"oldest", "0"}});
  random_only.run(seq);
  CHECK(random_only.victims().size() == 20);
  CHECK(random_only.victims() != lru_order);
}
