// LFU with aging as a k3host cache policy.
//
// Each resident key has an access count. A key loaded on its own miss starts at 1 (that
// access counts); a key inserted without an access (a prefetch) starts at 0. Every hit adds
// 1. The victim is the evictable key with the smallest count; ties go to the key used least
// recently (the oldest last access or, for a prefetch never accessed, its insertion), so on
// equal counts LFU degrades to LRU.
//
// Aging: after every `halve_every` requests (on_access calls), every resident count is
// halved (rounding down), so old popularity fades and a key that was hot a long time ago
// cannot squat a slot forever. `halve_every` = 0 picks 4 x capacity requests: long enough
// for counts to mean something, short enough to follow a shifting working set.
// Counts of keys that leave the cache are forgotten (in-cache LFU).
//
// Costs: O(log n) per request (an ordered index over (count, last use)), plus an O(n log n)
// rebuild per aging, amortised O(log n) when halve_every >= capacity.
#pragma once
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <unordered_map>

#include <k3/cache_policy.hpp>

namespace k3cache {

class LfuPolicy final : public k3::sdk::CachePolicy {
 public:
  explicit LfuPolicy(std::uint64_t halve_every) : halve_every_param_(halve_every) {}

  k3::sdk::Status reset(std::uint64_t capacity_slots) noexcept override;
  void on_access(k3::sdk::ExpertKey key, std::uint64_t seq) noexcept override;
  void on_insert(k3::sdk::ExpertKey key) noexcept override;
  void on_remove(k3::sdk::ExpertKey key) noexcept override;
  k3::sdk::Status choose_victim(k3::sdk::ExpertKey incoming, const k3::sdk::VictimQuery& query,
                                k3::sdk::ExpertKey& victim) noexcept override;
  [[nodiscard]] bool wants_future() const noexcept override { return false; }
  k3::sdk::Status set_future(std::span<const k3::sdk::ExpertKey> requests) noexcept override;

 private:
  struct Rank {
    std::uint64_t count = 0;
    std::uint64_t last_use = 0;  // policy clock: one tick per access or insertion
    std::uint64_t key = 0;
    friend bool operator<(const Rank& a, const Rank& b) noexcept {
      if (a.count != b.count) return a.count < b.count;
      if (a.last_use != b.last_use) return a.last_use < b.last_use;
      return a.key < b.key;
    }
  };
  struct Entry {
    std::uint64_t count = 0;
    std::uint64_t last_use = 0;
  };

  void age();

  std::uint64_t halve_every_param_;
  std::uint64_t halve_every_ = 1;
  std::uint64_t since_aging_ = 0;
  std::uint64_t clock_ = 0;
  std::optional<std::uint64_t> missed_;               // last accessed key that was not resident
  std::unordered_map<std::uint64_t, Entry> entries_;  // resident keys
  std::set<Rank> order_;                              // victim first
};

}  // namespace k3cache
