// S3-FIFO against hand-computed sequences. Capacity 4 with small_ratio 0.5: SMALL target 2,
// MAIN target 2, GHOST holds 2 keys. Queues are written head (newest) -> tail (oldest);
// f = the 2-bit counter.
#include "policy_driver.hpp"

using policy_test::Driver;

namespace {
const k3::PluginParams kHalfSmall = {{"small_ratio", "0.5"}};
}

TEST_CASE("s3fifo: promotion, ghost re-admission and MAIN eviction by hand", "[s3fifo]") {
  k3::PluginHost host;
  Driver d(host, "s3fifo", 4, kHalfSmall);
  // 1  A miss  S[A]
  // 2  B miss  S[B A]
  // 3  A hit   A f1
  // 4  B hit   B f1
  // 5  C miss  S[C B A]          (free slot)
  // 6  D miss  S[D C B A]        (free slot; now full)
  // 7  E miss  |S|=4>=2 -> SMALL: A f1 -> MAIN[A] (f0); B f1 -> MAIN[B A]; C f0 -> victim C,
  //            GHOST{C}.  S[E D]  M[B A]
  // 8  A hit   A f1
  // 9  F miss  |S|=2>=2 -> SMALL: D f0 -> victim D, GHOST{C D}.  S[F E]
  // 10 E hit   E f1
  // 11 G miss  SMALL: E f1 -> MAIN[E B A], |M|=3>2 -> MAIN: A f1 -> f0, to head [A E B];
  //            B f0 -> victim B (from MAIN: not remembered).  S[G F]  M[A E]
  // 12 D miss  SMALL: F f0 -> victim F, GHOST{C D F} -> over 2, drop C: GHOST{D F};
  //            D is in GHOST -> inserted at MAIN's head.  S[G]  M[D A E]
  // 13 H miss  |S|=1<2 -> MAIN: E f0 (reset on promotion) -> victim E.  S[H G]  M[D A]
  enum : std::uint32_t { A = 1, B, C, D, E, F, G, H };
  const int hits = d.run({A, B, A, B, C, D, E, A, F, E, G, D, H});
  CHECK(hits == 4);
  CHECK(d.victims() == std::vector<std::uint32_t>{C, D, B, F, E});
  // 14 A hit (A in MAIN), 15 C miss: C was dropped from GHOST at step 12, so it enters SMALL:
  //    |S|=2>=2 -> SMALL: G f0 -> victim G.  S[C H]
  CHECK(d.request(policy_test::key(A)));
  CHECK_FALSE(d.request(policy_test::key(C)));
  CHECK(d.victims().back() == G);
  // 16 I miss: SMALL: H f0 -> victim H (C, newer, stays): C entered SMALL, not MAIN.
  CHECK_FALSE(d.request(policy_test::key(9)));
  CHECK(d.victims().back() == H);
}

TEST_CASE("s3fifo: move_to_main_threshold 2 keeps once-hit keys in SMALL", "[s3fifo]") {
  k3::PluginHost host;
  Driver d(host, "s3fifo", 4, {{"small_ratio", "0.5"}, {"move_to_main_threshold", "2"}});
  // A B, A hit (f1), C D fill.  E miss: SMALL tail A f1 < 2 -> victim A (it would have been
  // promoted with the default threshold 1).
  enum : std::uint32_t { A = 1, B, C, D, E };
  d.run({A, B, A, C, D, E});
  CHECK(d.victims() == std::vector<std::uint32_t>{A});
}

TEST_CASE("s3fifo: a leased SMALL key is passed over where it stands", "[s3fifo]") {
  k3::PluginHost host;
  Driver d(host, "s3fifo", 4, kHalfSmall);
  enum : std::uint32_t { A = 1, B, C, D, E, F };
  d.run({A, B, A, B, C, D});  // S[D C B A], A f1, B f1
  d.lease(C);
  // E miss: A -> MAIN, B -> MAIN, C leased: skipped, D f0 -> victim D.  S[E C]  M[B A]
  d.request(policy_test::key(E));
  d.unlease_all();
  // F miss: |S|=2 -> SMALL tail C f0 -> victim C (kept its place at the tail).
  d.request(policy_test::key(F));
  CHECK(d.victims() == std::vector<std::uint32_t>{D, C});
}

TEST_CASE("s3fifo: the default SMALL is 10% of the slots", "[s3fifo]") {
  k3::PluginHost host;
  Driver d(host, "s3fifo", 10);
  // SMALL target = 1. Keys 1..10 fill the cache; 1..9 are hit once each.
  std::vector<std::uint32_t> seq;
  for (std::uint32_t i = 1; i <= 10; ++i) seq.push_back(i);
  for (std::uint32_t i = 1; i <= 9; ++i) seq.push_back(i);
  d.run(seq);
  // 11 miss: |S|=10>=1 -> SMALL from the tail: 1..9 have f1 and move to MAIN (9 keys > MAIN
  // target 9? no: 9 == 9), then 10 f0 -> victim 10.
  d.request(policy_test::key(11));
  // 12 miss: |S| = 1 (just 11) >= 1 -> SMALL: 11 f0 -> victim 11.
  d.request(policy_test::key(12));
  // 13 miss: 12 is SMALL's only key -> victim 12 (MAIN keeps the proven keys 1..9).
  d.request(policy_test::key(13));
  CHECK(d.victims() == std::vector<std::uint32_t>{10, 11, 12});
}

TEST_CASE("s3fifo: bad parameters are refused", "[s3fifo]") {
  k3::PluginHost host;
  CHECK_THROWS_WITH(host.create_cache("s3fifo", {{"small_ratio", "0"}}), Catch::Contains("small_ratio"));
  CHECK_THROWS_WITH(host.create_cache("s3fifo", {{"move_to_main_threshold", "4"}}),
                    Catch::Contains("move_to_main_threshold"));
  CHECK_THROWS_WITH(host.create_cache("s3fifo", {{"smal_ratio", "0.1"}}), Catch::Contains("smal_ratio"));
}

TEST_CASE("s3fifo: not_found when every resident key is leased", "[s3fifo]") {
  k3::PluginHost host;
  policy_test::check_not_found_when_all_leased(host, "s3fifo");
}
