// The SDK example plugin (sdk/examples/clock, built in tree by tests/fixtures into
// test-plugins/example-clock) loaded through the PluginHost and driven the way the host
// drives a cache policy (sdk/k3/cache_policy.hpp). Expected victims are worked out by hand
// from the CLOCK rules written in clock_policy.hpp.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <k3/error.hpp>
#include <k3/plugin_host.hpp>

namespace fs = std::filesystem;
using k3::sdk::ExpertKey;

namespace {

/// The host's side of the contract, in miniature: residency, capacity and leases.
class MiniHost final : public k3::sdk::VictimQuery {
 public:
  MiniHost(k3::sdk::CachePolicy& policy, std::uint64_t capacity) : policy_(policy), capacity_(capacity) {
    REQUIRE(policy_.reset(capacity).ok());
  }

  [[nodiscard]] bool evictable(ExpertKey key) const noexcept override {
    return resident_.count(key.packed()) != 0 && leased_.count(key.packed()) == 0;
  }

  /// One request; returns the victim if the request evicted one.
  std::optional<ExpertKey> request(ExpertKey key) {
    policy_.on_access(key, seq_++);
    if (resident_.count(key.packed()) != 0) return std::nullopt;
    std::optional<ExpertKey> evicted;
    if (resident_.size() == capacity_) {
      ExpertKey victim;
      const k3::sdk::Status st = policy_.choose_victim(key, *this, victim);
      REQUIRE(st.ok());
      REQUIRE(evictable(victim));  // the host's rule: resident and not leased
      resident_.erase(victim.packed());
      policy_.on_remove(victim);
      evicted = victim;
    }
    resident_.insert(key.packed());
    policy_.on_insert(key);
    return evicted;
  }

  /// A prefetch: inserted into a free slot without an access.
  void prefetch(ExpertKey key) {
    REQUIRE(resident_.size() < capacity_);
    resident_.insert(key.packed());
    policy_.on_insert(key);
  }

  void lease(ExpertKey key) { leased_.insert(key.packed()); }

 private:
  k3::sdk::CachePolicy& policy_;
  std::uint64_t capacity_;
  std::uint64_t seq_ = 0;
  std::set<std::uint64_t> resident_;
  std::set<std::uint64_t> leased_;
};

const ExpertKey A{0, 1}, B{0, 2}, C{1, 3}, D{1, 4}, P{2, 5};

std::shared_ptr<k3::sdk::CachePolicy> make_clock(k3::PluginHost& host, const k3::PluginParams& params = {}) {
  return host.create_cache("clock", params);
}

fs::path example_dir() { return fs::path(K3_BINARY_DIR) / "test-plugins" / "example-clock"; }

}  // namespace

TEST_CASE("example clock: a hit gives a key a second chance, not a new position", "[sdk][example]") {
  k3::PluginHost host({example_dir()});
  auto policy = make_clock(host);
  MiniHost cache(*policy, 2);
  // Ring after A, B: [A*, B*] (* = referenced), hand at A.
  CHECK_FALSE(cache.request(A));
  CHECK_FALSE(cache.request(B));
  // C: the hand clears A and B, comes back to A and takes it; C fills A's slot: [C*, B], hand at B.
  CHECK(cache.request(C) == A);
  CHECK_FALSE(cache.request(C));  // hit: C stays referenced
  CHECK_FALSE(cache.request(B));  // hit: B referenced again, and is now the most recent key
  // D: hand at B clears it, moves to C and clears it, back to B: B goes. (LRU would evict C.)
  CHECK(cache.request(D) == B);
}

TEST_CASE("example clock: leased keys are skipped and every key leased is not_found", "[sdk][example]") {
  k3::PluginHost host({example_dir()});
  auto policy = make_clock(host);
  MiniHost cache(*policy, 2);
  cache.request(A);
  cache.request(B);
  cache.lease(A);
  // A is skipped (bit kept); B is cleared, A skipped, B taken.
  CHECK(cache.request(C) == B);

  cache.lease(C);
  ExpertKey victim;
  const k3::sdk::Status st = policy->choose_victim(D, cache, victim);
  CHECK(st.code == k3::sdk::StatusCode::not_found);
}

TEST_CASE("example clock: an unused prefetch is evicted before a demand-loaded key", "[sdk][example]") {
  k3::PluginHost host({example_dir()});

  SECTION("default: a key loaded on its own miss starts referenced") {
    auto policy = make_clock(host);
    MiniHost cache(*policy, 2);
    cache.request(A);              // [A*]
    cache.prefetch(P);             // [A*, P]
    CHECK(cache.request(C) == P);  // A gets a second chance, P has none
  }
  SECTION("insert_referenced=false: the oldest key goes first") {
    auto policy = make_clock(host, {{"insert_referenced", "false"}});
    MiniHost cache(*policy, 2);
    cache.request(A);   // [A]
    cache.prefetch(P);  // [A, P]
    CHECK(cache.request(C) == A);
  }
}

TEST_CASE("example clock: reset, parameters and the optional future", "[sdk][example]") {
  k3::PluginHost host({example_dir()});
  auto policy = make_clock(host);
  CHECK(policy->reset(0).code == k3::sdk::StatusCode::invalid_argument);
  CHECK_FALSE(policy->wants_future());
  CHECK(policy->set_future({}).code == k3::sdk::StatusCode::unsupported);

  // reset() forgets everything: the same requests evict the same keys again.
  for (int round = 0; round < 2; ++round) {
    MiniHost cache(*policy, 2);
    cache.request(A);
    cache.request(B);
    CHECK(cache.request(C) == A);
  }

  std::vector<std::string> unknown;
  (void)host.create_cache("clock", {{"insert_referenced", "true"}, {"hand", "3"}}, &unknown);
  CHECK(unknown == std::vector<std::string>{"hand"});
  CHECK_THROWS_AS(host.create_cache("clock", {{"insert_referenced", "maybe"}}), k3::UsageError);
}
