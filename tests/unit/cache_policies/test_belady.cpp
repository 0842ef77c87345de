// Belady's MIN against hand-computed sequences: the victim is the resident key whose next
// request is farthest away (never = infinitely far; ties -> lower packed key).
#include "policy_driver.hpp"

using policy_test::Driver;
using policy_test::key;

namespace {
std::vector<k3::sdk::ExpertKey> keys_of(const std::vector<std::uint32_t>& experts) {
  std::vector<k3::sdk::ExpertKey> out;
  for (const std::uint32_t e : experts) out.push_back(key(e));
  return out;
}
}  // namespace

TEST_CASE("belady: farthest next use by hand, ties to the lower key", "[belady]") {
  enum : std::uint32_t { A = 1, B, C, D, E };
  //            0  1  2  3  4  5  6  7  8  9  10 11
  const std::vector<std::uint32_t> seq = {A, B, C, D, A, B, E, A, B, C, D, E};
  // 3 D miss: next uses A@4 B@5 C@9 -> C.
  // 6 E miss: A@7 B@8 D@10 -> D.
  // 9 C miss: A never, B never, E@11 -> A and B tie (never) -> A (lower key).
  // 10 D miss: B never, E@11, C never -> B (lower than C).
  // hits: 4 5 7 8 11.  (LRU on the same stream hits only 7 and 8.)
  const auto future = keys_of(seq);
  k3::PluginHost host;
  Driver d(host, "belady", 3);
  REQUIRE(d.policy().wants_future());
  REQUIRE(d.policy().set_future(future).ok());
  CHECK(d.run(seq) == 5);
  CHECK(d.victims() == std::vector<std::uint32_t>{C, D, A, B});
}

TEST_CASE("belady: a leased farthest key is skipped for the next farthest", "[belady]") {
  enum : std::uint32_t { A = 1, B, C, D };
  const std::vector<std::uint32_t> seq = {A, B, C, D, A, B, C};
  const auto future = keys_of(seq);
  k3::PluginHost host;
  Driver d(host, "belady", 3);
  REQUIRE(d.policy().set_future(future).ok());
  d.run({A, B, C});
  d.lease(C);  // C (next @6) would go; B (@5) is next farthest
  d.request(key(D));
  CHECK(d.victims() == std::vector<std::uint32_t>{B});
}

TEST_CASE("belady: a run that leaves the recorded stream is refused, not guessed", "[belady]") {
  const auto future = keys_of({1, 2, 3, 4});
  k3::PluginHost host;
  Driver d(host, "belady", 2);
  REQUIRE(d.policy().set_future(future).ok());
  d.policy().on_access(key(1), 0);
  d.policy().on_insert(key(1));
  d.policy().on_access(key(3), 1);  // the future says 2
  d.policy().on_insert(key(3));
  k3::sdk::ExpertKey victim;
  const std::set<std::uint64_t> resident = {key(1).packed(), key(3).packed()};
  const std::set<std::uint64_t> none;
  const auto st = d.policy().choose_victim(key(5), Driver::Query(resident, none), victim);
  CHECK(st.code == k3::sdk::StatusCode::invalid_argument);
  CHECK_THAT(st.detail, Catch::Contains("seq 1") && Catch::Contains("diverged"));
}

TEST_CASE("belady: without set_future choose_victim fails with a reason", "[belady]") {
  k3::PluginHost host;
  Driver d(host, "belady", 1);
  d.policy().on_insert(key(1));
  k3::sdk::ExpertKey victim;
  const std::set<std::uint64_t> resident = {key(1).packed()};
  const std::set<std::uint64_t> none;
  const auto st = d.policy().choose_victim(key(2), Driver::Query(resident, none), victim);
  CHECK(st.code == k3::sdk::StatusCode::invalid_argument);
  CHECK_THAT(st.detail, Catch::Contains("future"));
}

TEST_CASE("belady: not_found when every resident key is leased", "[belady]") {
  const auto future = keys_of({1, 2, 3});
  k3::PluginHost host;
  Driver d(host, "belady", 2);
  REQUIRE(d.policy().set_future(future).ok());
  d.run({1, 2});
  d.lease(1);
  d.lease(2);
  k3::sdk::ExpertKey victim;
  CHECK(d.policy().choose_victim(key(3), d.query(), victim).code == k3::sdk::StatusCode::not_found);
}
