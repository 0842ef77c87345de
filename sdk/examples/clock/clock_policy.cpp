#include "clock_policy.hpp"

#include <new>
#include <string>

namespace clock_example {

using k3::sdk::ExpertKey;
using k3::sdk::Status;
using k3::sdk::StatusCode;

Status ClockPolicy::reset(std::uint64_t capacity_slots) noexcept {
  if (capacity_slots == 0) return Status::error(StatusCode::invalid_argument, "clock: capacity must be > 0 slots");
  try {
    ring_.assign(capacity_slots, Slot{});
    free_slots_.clear();
    free_slots_.reserve(capacity_slots);
    // Fill slot 0 first, so the ring is in insertion order while the cache warms up.
    for (std::size_t i = capacity_slots; i-- > 0;) free_slots_.push_back(i);
    slot_of_.clear();
    slot_of_.reserve(capacity_slots);
  } catch (const std::bad_alloc&) {
    return Status::error(StatusCode::out_of_memory,
                         "clock: cannot allocate " + std::to_string(capacity_slots) + " slots");
  }
  hand_ = 0;
  missed_.reset();
  return Status::success();
}

void ClockPolicy::on_access(ExpertKey key, std::uint64_t) noexcept {
  const auto it = slot_of_.find(key.packed());
  if (it != slot_of_.end()) {
    ring_[it->second].referenced = true;
    missed_.reset();
  } else {
    missed_ = key.packed();  // on_insert(key) follows if the host loads it
  }
}

void ClockPolicy::on_insert(ExpertKey key) noexcept {
  const std::uint64_t packed = key.packed();
  if (slot_of_.count(packed) != 0) return;  // already resident: nothing to do
  try {
    std::size_t slot = 0;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      // The host inserts only into a free slot; should it ever insert beyond the capacity
      // given to reset(), grow the ring rather than lose track of a resident key.
      slot = ring_.size();
      ring_.push_back(Slot{});
    }
    const bool demand_loaded = missed_ == packed;
    ring_[slot] = Slot{packed, true, insert_referenced_ && demand_loaded};
    slot_of_.emplace(packed, slot);
  } catch (const std::bad_alloc&) {
    // Cannot track the key; choose_victim will simply never offer it.
  }
  if (missed_ == packed) missed_.reset();
}

void ClockPolicy::on_remove(ExpertKey key) noexcept {
  const auto it = slot_of_.find(key.packed());
  if (it == slot_of_.end()) return;
  const std::size_t slot = it->second;
  slot_of_.erase(it);
  ring_[slot] = Slot{};
  try {
    free_slots_.push_back(slot);  // capacity reserved in reset(): does not allocate
  } catch (const std::bad_alloc&) {
  }
}

Status ClockPolicy::choose_victim(ExpertKey, const k3::sdk::VictimQuery& query, ExpertKey& victim) noexcept {
  const std::size_t n = ring_.size();
  if (slot_of_.empty() || n == 0) return Status::error(StatusCode::not_found, "clock: no resident key to evict");
  // Two full turns suffice: the first clears every evictable key's bit, so the second
  // finds one unless no resident key is evictable.
  for (std::size_t step = 0; step < 2 * n; ++step) {
    Slot& slot = ring_[hand_];
    const std::size_t here = hand_;
    hand_ = (hand_ + 1) % n;
    if (!slot.occupied || !query.evictable(ExpertKey::unpack(slot.key))) continue;
    if (slot.referenced) {
      slot.referenced = false;  // second chance
      continue;
    }
    victim = ExpertKey::unpack(ring_[here].key);
    return Status::success();
  }
  return Status::error(StatusCode::not_found, "clock: every resident key is leased or pinned");
}

Status ClockPolicy::set_future(std::span<const ExpertKey>) noexcept {
  return Status::error(StatusCode::unsupported, "clock does not use the future request stream");
}

}  // namespace clock_example
