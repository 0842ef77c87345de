// Belady's MIN (the clairvoyant optimum for a cache that must admit every miss) as a
// k3host cache policy. It needs the whole request stream: wants_future() is true, and the
// host hands it over with set_future() before the first access.
//
// Victim: the resident, evictable key whose next request is farthest in the future; a key
// never requested again is infinitely far. Ties (only possible between never-again keys)
// go to the lower packed key ((layer << 32) | expert), so runs are reproducible.
//
// Cost: set_future() computes, for every request i, the index of the next request of the
// same key (one backward pass with a hash map, O(n)). Afterwards each access is O(log r)
// (r = resident keys): the resident keys sit in an ordered index by next use.
//
// The stream must be followed exactly: request `seq` must be future[seq]. If the host's
// requests diverge (another prompt, another pipeline), the policy does not guess: the next
// choose_victim fails with invalid_argument naming the first divergent request, as does a
// choose_victim before set_future().
#pragma once
#include <cstdint>
#include <limits>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <k3/cache_policy.hpp>

namespace k3cache {

class BeladyPolicy final : public k3::sdk::CachePolicy {
 public:
  k3::sdk::Status reset(std::uint64_t capacity_slots) noexcept override;
  void on_access(k3::sdk::ExpertKey key, std::uint64_t seq) noexcept override;
  void on_insert(k3::sdk::ExpertKey key) noexcept override;
  void on_remove(k3::sdk::ExpertKey key) noexcept override;
  k3::sdk::Status choose_victim(k3::sdk::ExpertKey incoming, const k3::sdk::VictimQuery& query,
                                k3::sdk::ExpertKey& victim) noexcept override;
  [[nodiscard]] bool wants_future() const noexcept override { return true; }
  k3::sdk::Status set_future(std::span<const k3::sdk::ExpertKey> requests) noexcept override;

 private:
  static constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

  struct Rank {
    std::uint64_t next_use = kNever;
    std::uint64_t key = 0;
    // Farthest next use first; equal (never again) -> lower key first.
    friend bool operator<(const Rank& a, const Rank& b) noexcept {
      if (a.next_use != b.next_use) return a.next_use > b.next_use;
      return a.key < b.key;
    }
  };
  struct KeyState {
    std::uint64_t next_use = kNever;  // index of this key's next request at or after `expected_seq_`
    bool resident = false;
  };

  void diverge(std::string why) noexcept;

  std::span<const k3::sdk::ExpertKey> future_;
  std::vector<std::uint64_t> next_after_;  // next_after_[i]: next request of future_[i]'s key after i
  std::unordered_map<std::uint64_t, KeyState> keys_;
  std::set<Rank> order_;  // resident keys, victim first
  std::uint64_t expected_seq_ = 0;
  bool have_future_ = false;
  std::string error_;  // set once the stream diverged
};

}  // namespace k3cache
