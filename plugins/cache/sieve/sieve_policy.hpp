// SIEVE (Zhang et al., "SIEVE is Simpler than LRU", NSDI 2024) as a k3host cache policy.
//
// One FIFO queue (new keys enter at the head) with a `visited` bit per key and a hand.
//   hit:    set the key's visited bit (no queue move).
//   insert: new key at the head, visited = false.
//   evict:  the hand starts where it stopped last time (at the tail when it has none) and
//           moves toward the head, wrapping to the tail: a visited key has its bit cleared
//           and is kept; the first unvisited key is the victim, and the hand stays at the
//           victim's newer neighbour. Unlike CLOCK, survivors are not moved: new keys stay
//           near the head, so one-hit wonders leave quickly.
//
// A key the host cannot evict (leased, pinned) is passed over untouched (its bit kept) and
// the hand goes on in its own order. Two sweeps suffice: the first clears every evictable
// key's bit, the second finds one; otherwise not_found (every resident key is leased).
#pragma once
#include <cstdint>
#include <span>
#include <unordered_map>

#include <k3/cache_policy.hpp>

#include "key_list.hpp"

namespace k3cache {

class SievePolicy final : public k3::sdk::CachePolicy {
 public:
  k3::sdk::Status reset(std::uint64_t capacity_slots) noexcept override;
  void on_access(k3::sdk::ExpertKey key, std::uint64_t seq) noexcept override;
  void on_insert(k3::sdk::ExpertKey key) noexcept override;
  void on_remove(k3::sdk::ExpertKey key) noexcept override;
  k3::sdk::Status choose_victim(k3::sdk::ExpertKey incoming, const k3::sdk::VictimQuery& query,
                                k3::sdk::ExpertKey& victim) noexcept override;
  [[nodiscard]] bool wants_future() const noexcept override { return false; }
  k3::sdk::Status set_future(std::span<const k3::sdk::ExpertKey> requests) noexcept override;

 private:
  struct Node {
    std::uint64_t key = 0;
    std::uint32_t prev = kNil;  // newer neighbour
    std::uint32_t next = kNil;  // older neighbour
    bool visited = false;
  };

  NodeSlab<Node> slab_;
  KeyList<Node> queue_;
  std::unordered_map<std::uint64_t, std::uint32_t> index_;  // resident key -> node
  std::uint32_t hand_ = kNil;                               // next node to examine; kNil = start at the tail
};

}  // namespace k3cache
