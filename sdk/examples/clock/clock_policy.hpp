// CLOCK, the second-chance approximation of LRU (Corbató 1968), as a k3host cache policy.
//
// The resident keys sit in a ring of `capacity` slots, each with a reference bit. A hit sets
// the key's bit. To find a victim the hand sweeps the ring: a key whose bit is set gets a
// second chance (the bit is cleared and the hand moves on); the first evictable key whose
// bit is clear is the victim, and the hand stops just past it. A newcomer takes the slot its
// victim left, so it is the last key the hand reaches again.
//
// Unlike LRU, a hit costs one bit write and no list move; the price is a coarser order: all
// keys touched since the hand last passed look equally recent.
//
// k3host specifics (sdk/k3/cache_policy.hpp):
// - keys the host cannot evict (leased, pinned) are skipped by the hand and keep their bit;
// - a key inserted right after its own miss (on_access then on_insert) starts referenced
//   when `insert_referenced` is true (the default, as a page fault sets the bit in the
//   original CLOCK); a prefetched key (inserted with no access) starts unreferenced, so an
//   unused prefetch is the first to go.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include <k3/plugin.hpp>  // the SDK's one include

namespace clock_example {

class ClockPolicy final : public k3::sdk::CachePolicy {
 public:
  explicit ClockPolicy(bool insert_referenced) : insert_referenced_(insert_referenced) {}

  k3::sdk::Status reset(std::uint64_t capacity_slots) noexcept override;
  void on_access(k3::sdk::ExpertKey key, std::uint64_t seq) noexcept override;
  void on_insert(k3::sdk::ExpertKey key) noexcept override;
  void on_remove(k3::sdk::ExpertKey key) noexcept override;
  k3::sdk::Status choose_victim(k3::sdk::ExpertKey incoming, const k3::sdk::VictimQuery& query,
                                k3::sdk::ExpertKey& victim) noexcept override;
  [[nodiscard]] bool wants_future() const noexcept override { return false; }
  k3::sdk::Status set_future(std::span<const k3::sdk::ExpertKey> requests) noexcept override;

 private:
  struct Slot {
    std::uint64_t key = 0;  // ExpertKey::packed()
    bool occupied = false;
    bool referenced = false;
  };

  std::vector<Slot> ring_;
  std::vector<std::size_t> free_slots_;  // LIFO: the slot freed last is filled first
  std::unordered_map<std::uint64_t, std::size_t> slot_of_;
  std::size_t hand_ = 0;
  std::optional<std::uint64_t> missed_;  // the last accessed key that was not resident
  bool insert_referenced_;
};

}  // namespace clock_example
