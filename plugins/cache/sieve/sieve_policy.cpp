#include "sieve_policy.hpp"

#include <new>
#include <string>

namespace k3cache {

using k3::sdk::ExpertKey;
using k3::sdk::Status;
using k3::sdk::StatusCode;

Status SievePolicy::reset(std::uint64_t capacity_slots) noexcept {
  if (capacity_slots == 0) return Status::error(StatusCode::invalid_argument, "sieve: capacity must be > 0 slots");
  if (capacity_slots >= kNil) return Status::error(StatusCode::invalid_argument, "sieve: capacity too large");
  try {
    slab_.reset(static_cast<std::size_t>(capacity_slots));
    queue_.clear();
    index_.clear();
    index_.reserve(static_cast<std::size_t>(capacity_slots));
  } catch (const std::bad_alloc&) {
    return Status::error(StatusCode::out_of_memory,
                         "sieve: cannot allocate state for " + std::to_string(capacity_slots) + " slots");
  }
  hand_ = kNil;
  return Status::success();
}

void SievePolicy::on_access(ExpertKey key, std::uint64_t) noexcept {
  const auto it = index_.find(key.packed());
  if (it != index_.end()) slab_[it->second].visited = true;
}

void SievePolicy::on_insert(ExpertKey key) noexcept {
  const std::uint64_t packed = key.packed();
  try {
    if (index_.count(packed) != 0) return;  // already resident
    Node init;
    init.key = packed;
    const std::uint32_t i = slab_.alloc(init);
    queue_.push_head(slab_, i);
    index_.emplace(packed, i);
  } catch (const std::bad_alloc&) {
    // Cannot track the key: it is simply never offered as a victim.
  }
}

void SievePolicy::on_remove(ExpertKey key) noexcept {
  const auto it = index_.find(key.packed());
  if (it == index_.end()) return;
  const std::uint32_t i = it->second;
  if (hand_ == i) hand_ = slab_[i].prev;  // the hand moves on toward the head (kNil: wraps)
  queue_.unlink(slab_, i);
  index_.erase(it);
  try {
    slab_.release(i);
  } catch (const std::bad_alloc&) {
  }
}

Status SievePolicy::choose_victim(ExpertKey, const k3::sdk::VictimQuery& query, ExpertKey& victim) noexcept {
  if (queue_.empty()) return Status::error(StatusCode::not_found, "sieve: no resident key to evict");
  std::uint32_t cur = hand_ != kNil ? hand_ : queue_.tail();
  const std::size_t limit = 2 * queue_.size() + 1;
  for (std::size_t step = 0; step < limit; ++step) {
    Node& n = slab_[cur];
    if (query.evictable(ExpertKey::unpack(n.key))) {
      if (!n.visited) {
        hand_ = cur;  // on_remove(victim) moves the hand to its newer neighbour
        victim = ExpertKey::unpack(n.key);
        return Status::success();
      }
      n.visited = false;
    }
    cur = n.prev != kNil ? n.prev : queue_.tail();
  }
  hand_ = cur;
  return Status::error(StatusCode::not_found, "sieve: every resident key is leased or pinned");
}

Status SievePolicy::set_future(std::span<const ExpertKey>) noexcept {
  return Status::error(StatusCode::unsupported, "sieve does not use the future request stream");
}

}  // namespace k3cache
