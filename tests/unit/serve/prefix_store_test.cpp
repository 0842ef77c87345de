// The prefix-reuse snapshot store (serve/prefix_store.hpp): the longest stored prefix of a
// request's ids, the byte budget and least-recently-used eviction. A fake snapshot type
// stands in for k3::SessionSnapshot (tokens() and bytes() are all the store reads).
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "serve/prefix_store.hpp"

namespace {

struct Fake {
  std::vector<std::uint32_t> ids;
  std::size_t size = 0;
  [[nodiscard]] const std::vector<std::uint32_t>& tokens() const { return ids; }
  [[nodiscard]] std::size_t bytes() const { return size; }
};

std::vector<std::uint32_t> seq(std::uint32_t n) {
  std::vector<std::uint32_t> v;
  for (std::uint32_t i = 0; i < n; ++i) v.push_back(100 + i);
  return v;
}

}  // namespace

TEST_CASE("the longest stored prefix wins, a non-prefix never matches", "[serve][prefix]") {
  k3::serve::PrefixStore<Fake> store(1000);
  const auto ids = seq(20);
  store.put({seq(5), 10});
  store.put({seq(12), 10});
  auto other = seq(15);
  other[3] = 7;  // diverges at 3
  store.put({other, 10});
  const Fake* hit = store.longest_prefix(ids, ids.size() - 1);
  REQUIRE(hit != nullptr);
  CHECK(hit->tokens() == seq(12));
  // Limited to 8 tokens: the 12-token entry is too long, the 5-token one fits.
  hit = store.longest_prefix(ids, 8);
  REQUIRE(hit != nullptr);
  CHECK(hit->tokens().size() == 5);
  // Nothing is a prefix of ids that start differently.
  std::vector<std::uint32_t> fresh = {1, 2, 3, 4, 5, 6};
  CHECK(store.longest_prefix(fresh, fresh.size()) == nullptr);
  // An entry as long as the request is not a prefix it may use when max_len excludes it.
  CHECK(store.longest_prefix(seq(12), 11)->tokens().size() == 5);
}

TEST_CASE("the budget holds: least recently used entries go first", "[serve][prefix]") {
  k3::serve::PrefixStore<Fake> store(100);
  store.put({seq(1), 40});
  store.put({seq(2), 40});
  // Using seq(1) makes seq(2) the least recently used.
  REQUIRE(store.longest_prefix(seq(3), 1) != nullptr);
  store.put({seq(3), 40});  // 120 > 100: one must go
  CHECK(store.bytes() <= store.budget());
  CHECK(store.size() == 2);
  CHECK(store.evictions() == 1);
  CHECK(store.longest_prefix(seq(2), 2)->tokens().size() == 1);  // seq(2) is gone; seq(1) remains
  CHECK(store.longest_prefix(seq(4), 3)->tokens().size() == 3);
  // Larger than the whole budget: not kept, nothing else dropped.
  CHECK_FALSE(store.put({seq(9), 101}));
  CHECK(store.size() == 2);
  // The same tokens replace the old entry instead of adding a second one.
  CHECK(store.put({seq(3), 50}));
  CHECK(store.size() == 2);
  CHECK(store.bytes() == 90);
  store.clear();
  CHECK(store.bytes() == 0);
  CHECK(store.longest_prefix(seq(4), 3) == nullptr);
}

TEST_CASE("a zero budget keeps nothing", "[serve][prefix]") {
  k3::serve::PrefixStore<Fake> store(0);
  CHECK_FALSE(store.put({seq(4), 1}));
  CHECK(store.size() == 0);
}
