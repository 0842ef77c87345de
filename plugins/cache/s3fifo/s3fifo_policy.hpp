// S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction", SOSP 2023) as a
// k3host cache policy.
//
// Three FIFO queues: SMALL (a probation queue, `small_ratio` of the slots, at least 1),
// MAIN (the rest of the slots) and GHOST (keys only, no slots: remembers up to
// `ghost_ratio` x |MAIN target| keys recently evicted from SMALL). Each resident key has a
// 2-bit saturating access counter (0..3), incremented on every hit.
//
//   insert: a key found in GHOST goes to MAIN's head (it proved itself once); any other key
//           goes to SMALL's head. The counter starts at 0.
//   evict:  if |SMALL| >= its target (or MAIN is empty) evict from SMALL, else from MAIN.
//     SMALL: look at its tail. counter >= move_to_main_threshold -> reset the counter, move
//            the key to MAIN's head, and if MAIN now exceeds its target evict from MAIN;
//            otherwise -> that key is the victim (it goes to GHOST when removed).
//     MAIN:  look at its tail. counter > 0 -> decrement, reinsert at MAIN's head;
//            counter == 0 -> that key is the victim.
//
// The paper's algorithm with one shared slot budget: SMALL and MAIN targets add up to the
// capacity, and "MAIN is full" means MAIN holds more than its target. A key the host cannot
// evict (leased, pinned) is passed over where it stands: it keeps its place and counter,
// and the scan goes on with the next key in the queue's own order; if one queue has nothing
// evictable the other is tried, and not_found means no resident key is evictable.
// Any key that leaves SMALL (evicted, or dropped by the host) is remembered in GHOST.
#pragma once
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>

#include <k3/cache_policy.hpp>

#include "key_list.hpp"

namespace k3cache {

/// The policy's parameters; their defaults and ranges are the plugin's table (kParams in
/// plugin.cpp), which the factory reads them through.
struct S3FifoParams {
  double small_ratio = 0;                    ///< SMALL target as a fraction of the slots (paper: 10%)
  double ghost_ratio = 0;                    ///< GHOST entries per MAIN-target slot (paper: same size)
  std::uint32_t move_to_main_threshold = 0;  ///< counter value that promotes SMALL -> MAIN (1..3)
};

class S3FifoPolicy final : public k3::sdk::CachePolicy {
 public:
  explicit S3FifoPolicy(S3FifoParams params) : params_(params) {}

  k3::sdk::Status reset(std::uint64_t capacity_slots) noexcept override;
  void on_access(k3::sdk::ExpertKey key, std::uint64_t seq) noexcept override;
  void on_insert(k3::sdk::ExpertKey key) noexcept override;
  void on_remove(k3::sdk::ExpertKey key) noexcept override;
  k3::sdk::Status choose_victim(k3::sdk::ExpertKey incoming, const k3::sdk::VictimQuery& query,
                                k3::sdk::ExpertKey& victim) noexcept override;
  [[nodiscard]] bool wants_future() const noexcept override { return false; }
  k3::sdk::Status set_future(std::span<const k3::sdk::ExpertKey> requests) noexcept override;

 private:
  enum class Queue : std::uint8_t { small, main };
  struct Node {
    std::uint64_t key = 0;
    std::uint32_t prev = kNil;
    std::uint32_t next = kNil;
    std::uint8_t freq = 0;  // 2-bit saturating counter, 0..3
    Queue queue = Queue::small;
  };

  std::optional<std::uint32_t> evict_small(const k3::sdk::VictimQuery& query);
  std::optional<std::uint32_t> evict_main(const k3::sdk::VictimQuery& query);
  void remember_ghost(std::uint64_t key);
  KeyList<Node>& list(Queue q) noexcept { return q == Queue::small ? small_ : main_; }

  S3FifoParams params_;
  std::uint64_t capacity_ = 0;
  std::size_t small_target_ = 1;
  std::size_t main_target_ = 0;
  std::size_t ghost_capacity_ = 0;
  NodeSlab<Node> slab_;
  KeyList<Node> small_;
  KeyList<Node> main_;
  std::unordered_map<std::uint64_t, std::uint32_t> index_;  // resident key -> node
  // GHOST: FIFO of (key, stamp); `ghost_` maps a remembered key to the stamp of its live
  // entry, so an entry whose key was re-admitted (and erased from the map) is stale and
  // skipped when it reaches the front.
  std::deque<std::pair<std::uint64_t, std::uint64_t>> ghost_fifo_;
  std::unordered_map<std::uint64_t, std::uint64_t> ghost_;
  std::uint64_t ghost_stamp_ = 0;
};

}  // namespace k3cache
