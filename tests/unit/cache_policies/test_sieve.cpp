// SIEVE against hand-computed sequences. Queues are written head (newest) -> tail
// (oldest); "*" marks a visited key; the hand is where the next eviction looks first.
#include "policy_driver.hpp"

using policy_test::Driver;

TEST_CASE("sieve: visited keys survive while the hand moves on", "[sieve]") {
  k3::PluginHost host;
  Driver d(host, "sieve", 3);
  // 1 2 3      -> [3 2 1], hand at the tail
  // 1 hit      -> [3 2 1*]
  // 4 miss     -> hand at 1*: clear, move to 2; 2 unvisited: evict 2, hand -> 3.  [4 3 1]
  // 2 miss     -> hand at 3: evict 3, hand -> 4.                                [2 4 1]
  // 5 miss     -> hand at 4: evict 4, hand -> 2.                                [5 2 1]
  // 1 hit      -> [5 2 1*]
  // 3 miss     -> hand at 2: evict 2, hand -> 5.                                [3 5 1*]
  // 6 miss     -> hand at 5: evict 5, hand -> 3.                                [6 3 1*]
  const int hits = d.run({1, 2, 3, 1, 4, 2, 5, 1, 3, 6});
  CHECK(hits == 2);
  CHECK(d.victims() == std::vector<std::uint32_t>{2, 3, 4, 2, 5});
}

TEST_CASE("sieve: the hand wraps from the head to the tail", "[sieve]") {
  k3::PluginHost host;
  Driver d(host, "sieve", 2);
  // 1 2 -> [2 1]; 1 hit, 2 hit -> [2* 1*]
  // 3 miss: hand at tail 1*: clear -> 2*: clear -> (head passed) wrap to 1: evict 1, hand -> 2. [3 2]
  // 4 miss: hand at 2 (cleared): evict 2, hand -> 3.                                           [4 3]
  const int hits = d.run({1, 2, 1, 2, 3, 4});
  CHECK(hits == 2);
  CHECK(d.victims() == std::vector<std::uint32_t>{1, 2});
}

TEST_CASE("sieve: a leased key is skipped, keeps its place, and the next in order goes", "[sieve]") {
  k3::PluginHost host;
  Driver d(host, "sieve", 3);
  d.run({1, 2, 3});                // [3 2 1], nothing visited
  d.lease(1);                      // the hand would pick 1
  d.request(policy_test::key(4));  // 1 skipped; 2 evicted; hand -> 3.  [4 3 1]
  d.unlease_all();
  d.request(policy_test::key(5));  // hand at 3: evicted; hand -> 4.  [5 4 1]
  d.request(policy_test::key(6));  // hand at 4: evicted; hand -> 5.  [6 5 1]
  d.request(policy_test::key(7));  // hand at 5: evicted; hand -> 6.  [7 6 1]
  d.request(policy_test::key(8));  // hand at 6: evicted; hand -> 7.  [8 7 1]
  CHECK(d.victims() == std::vector<std::uint32_t>{2, 3, 4, 5, 6});
}

TEST_CASE("sieve: not_found when every resident key is leased", "[sieve]") {
  k3::PluginHost host;
  policy_test::check_not_found_when_all_leased(host, "sieve");
}
