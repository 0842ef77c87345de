// LFU with aging against hand-computed sequences. (count, last use) per key; the clock
// ticks once per request.
#include "policy_driver.hpp"

using policy_test::Driver;

TEST_CASE("lfu: fewest uses goes first, ties by least recent use", "[lfu]") {
  k3::PluginHost host;
  Driver d(host, "lfu", 3, {{"halve_every", "1000"}});
  enum : std::uint32_t { A = 1, B, C, D, E, F };
  // 1 A miss (1,t1)  2 B miss (1,t2)  3 A hit (2,t3)  4 C miss (1,t4)
  // 5 D miss: B(1,t2) C(1,t4) A(2,t3) -> B (count 1, older than C).  D (1,t5)
  // 6 C hit (2,t6)
  // 7 E miss: D(1,t5) is the only count 1 -> D.  E (1,t7)
  // 8 E hit (2,t8)
  // 9 F miss: A(2,t3) C(2,t6) E(2,t8) all 2 -> A, the least recently used.
  const int hits = d.run({A, B, A, C, D, C, E, E, F});
  CHECK(hits == 3);
  CHECK(d.victims() == std::vector<std::uint32_t>{B, D, A});
}

TEST_CASE("lfu: aging halves every count after halve_every requests", "[lfu]") {
  enum : std::uint32_t { A = 1, B, C, D };
  // 1 A miss (1)  2-4 A hits (4); request 4 completes 4 requests -> halve: A 2
  // 5 B miss (1)  6 C miss: B(1) < A(2) -> B.  7 C hit (2)
  // 8 D miss: request 8 completes the next 4 -> halve: A 1 (t4), C 1 (t7) -> A, the older.
  // Without aging A (4) outlives C (2) and C is the victim.
  const std::vector<std::uint32_t> seq = {A, A, A, A, B, C, C, D};
  k3::PluginHost host;
  Driver aged(host, "lfu", 2, {{"halve_every", "4"}});
  aged.run(seq);
  CHECK(aged.victims() == std::vector<std::uint32_t>{B, A});
  Driver unaged(host, "lfu", 2, {{"halve_every", "1000000"}});
  unaged.run(seq);
  CHECK(unaged.victims() == std::vector<std::uint32_t>{B, C});
}

TEST_CASE("lfu: a prefetched key starts at count 0", "[lfu]") {
  k3::PluginHost host;
  Driver d(host, "lfu", 3, {{"halve_every", "1000"}});
  d.run({1, 2});
  d.policy().on_insert(policy_test::key(3));  // a prefetch: no access
  k3::sdk::ExpertKey victim;
  // Keys 1 and 2 have count 1; 3 has count 0 -> 3 goes first.
  std::set<std::uint64_t> resident = {policy_test::key(1).packed(), policy_test::key(2).packed(),
                                      policy_test::key(3).packed()};
  const std::set<std::uint64_t> none;
  const Driver::Query q(resident, none);
  REQUIRE(d.policy().choose_victim(policy_test::key(4), q, victim).ok());
  CHECK(victim.expert == 3);
}

TEST_CASE("lfu: a leased minimum is skipped for the next by count", "[lfu]") {
  k3::PluginHost host;
  Driver d(host, "lfu", 3, {{"halve_every", "1000"}});
  d.run({1, 2, 2, 3, 3, 3});  // counts 1:1 2:2 3:3
  d.lease(1);
  d.request(policy_test::key(4));
  CHECK(d.victims() == std::vector<std::uint32_t>{2});
}

TEST_CASE("lfu: not_found when every resident key is leased and a bad halve_every is refused", "[lfu]") {
  k3::PluginHost host;
  policy_test::check_not_found_when_all_leased(host, "lfu");
  CHECK_THROWS_WITH(host.create_cache("lfu", {{"halve_every", "often"}}), Catch::Contains("halve_every"));
}
