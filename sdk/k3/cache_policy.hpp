// k3host plugin SDK: expert-cache policies. \since ABI 1
//
// The host owns the slot arena, the I/O, leases and pins; a policy only ranks keys.
// Keys are (layer, expert) pairs. The host tells the policy what happens, in this order:
//
//   per serving group (one forward chunk's requests at one layer; a decode step is a
//   chunk of one token), first every request of the group, in request order:
//       on_access(key, seq)            seq counts requests from 0, one per (token, layer, expert)
//   then the group's distinct keys in ascending expert id, in batches of at most capacity
//   (a batch's resident keys are leased first), for each key that is not resident:
//     when a slot is free:                            on_insert(key)
//     when the cache is full:
//       choose_victim(incoming, query) -> victim      must be resident and query.evictable()
//       on_remove(victim); on_insert(key)
//   when the host drops a key for its own reasons:    on_remove(key)
//   when the host reads a key ahead (cache.prefetch.depth > 0), between serving groups:
//       [choose_victim, on_remove(victim)]; on_insert(key); no on_access
//       (then on_prefetch(key) for a policy that is a CachePrefetchListener, k3/cache_prefetch.hpp)
// The simulator (k3host sim) follows the same order, so its hit rate is the live one
// (without prefetch: the simulator does not prefetch, so with it the two differ).
//
// Rules the host enforces (so a policy cannot break them): a leased or pinned key is never
// a victim — query.evictable(k) is false for it, and a victim it refuses is an error;
// prefetched keys are inserted with on_insert and are never counted as hits (a request they
// serve is a prefetch hit).
// Capacity is in slots, fixed for the policy's lifetime (given by reset()).
// Thread-safety: the host calls a policy from one thread at a time.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include <k3/status.hpp>

namespace k3::sdk {

struct ExpertKey {
  std::uint32_t layer = 0;
  std::uint32_t expert = 0;
  [[nodiscard]] constexpr std::uint64_t packed() const noexcept { return (std::uint64_t{layer} << 32) | expert; }
  static constexpr ExpertKey unpack(std::uint64_t v) noexcept {
    return {static_cast<std::uint32_t>(v >> 32), static_cast<std::uint32_t>(v)};
  }
  friend constexpr bool operator==(ExpertKey a, ExpertKey b) noexcept {
    return a.layer == b.layer && a.expert == b.expert;
  }
};

/// What the host lets a policy ask while choosing a victim.
class __attribute__((visibility("default"))) VictimQuery {
 public:
  virtual ~VictimQuery() = default;
  /// False for keys that are leased (in use by a compute) or pinned, or not resident.
  [[nodiscard]] virtual bool evictable(ExpertKey key) const noexcept = 0;
};

class __attribute__((visibility("default"))) CachePolicy {
 public:
  virtual ~CachePolicy() = default;
  /// Starts over with an empty cache of `capacity_slots` slots (> 0).
  virtual Status reset(std::uint64_t capacity_slots) noexcept = 0;
  /// Every request, hit or miss, in request order.
  virtual void on_access(ExpertKey key, std::uint64_t seq) noexcept = 0;
  /// `key` now occupies a slot.
  virtual void on_insert(ExpertKey key) noexcept = 0;
  /// `key` left its slot.
  virtual void on_remove(ExpertKey key) noexcept = 0;
  /// Picks a resident, evictable key to make room for `incoming`. not_found when every
  /// resident key is leased (the host then waits or fails; it never evicts a leased key).
  virtual Status choose_victim(ExpertKey incoming, const VictimQuery& query, ExpertKey& victim) noexcept = 0;
  /// Optional capability: true if the policy needs the future request stream (Belady).
  [[nodiscard]] virtual bool wants_future() const noexcept = 0;
  /// The whole request stream of the run, in request order (index = seq). Called after
  /// reset() and before the first access, only when wants_future(). The span stays valid
  /// until the next reset() or the policy's destruction.
  virtual Status set_future(std::span<const ExpertKey> requests) noexcept = 0;
};

}  // namespace k3::sdk
