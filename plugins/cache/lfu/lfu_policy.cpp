#include "lfu_policy.hpp"

#include <new>
#include <string>

namespace k3cache {

using k3::sdk::ExpertKey;
using k3::sdk::Status;
using k3::sdk::StatusCode;

Status LfuPolicy::reset(std::uint64_t capacity_slots) noexcept {
  if (capacity_slots == 0) return Status::error(StatusCode::invalid_argument, "lfu: capacity must be > 0 slots");
  try {
    entries_.clear();
    entries_.reserve(static_cast<std::size_t>(capacity_slots));
    order_.clear();
  } catch (const std::bad_alloc&) {
    return Status::error(StatusCode::out_of_memory,
                         "lfu: cannot allocate state for " + std::to_string(capacity_slots) + " slots");
  }
  halve_every_ = halve_every_param_ != 0 ? halve_every_param_ : 4 * capacity_slots;
  since_aging_ = 0;
  clock_ = 0;
  missed_.reset();
  return Status::success();
}

void LfuPolicy::on_access(ExpertKey key, std::uint64_t) noexcept {
  const std::uint64_t packed = key.packed();
  ++clock_;
  const auto it = entries_.find(packed);
  if (it == entries_.end()) {
    missed_ = packed;  // on_insert(key) follows if the host loads it
  } else {
    missed_.reset();
    Entry& e = it->second;
    try {
      order_.erase(Rank{e.count, e.last_use, packed});
      ++e.count;
      e.last_use = clock_;
      order_.insert(Rank{e.count, e.last_use, packed});
    } catch (const std::bad_alloc&) {
      entries_.erase(it);  // keep the index and the map consistent: forget the key
    }
  }
  if (++since_aging_ >= halve_every_) {
    since_aging_ = 0;
    try {
      age();
    } catch (const std::bad_alloc&) {
    }
  }
}

void LfuPolicy::age() {
  order_.clear();
  for (auto& [packed, e] : entries_) {
    e.count /= 2;
    order_.insert(Rank{e.count, e.last_use, packed});
  }
}

void LfuPolicy::on_insert(ExpertKey key) noexcept {
  const std::uint64_t packed = key.packed();
  if (entries_.count(packed) != 0) return;  // already resident
  const bool demand_loaded = missed_ == packed;
  missed_.reset();
  try {
    // A demand load already ticked the clock in on_access; a prefetch ticks it now.
    const Entry e{demand_loaded ? 1u : 0u, demand_loaded ? clock_ : ++clock_};
    order_.insert(Rank{e.count, e.last_use, packed});
    entries_.emplace(packed, e);
  } catch (const std::bad_alloc&) {
    order_.erase(Rank{demand_loaded ? 1u : 0u, clock_, packed});
  }
}

void LfuPolicy::on_remove(ExpertKey key) noexcept {
  const auto it = entries_.find(key.packed());
  if (it == entries_.end()) return;
  order_.erase(Rank{it->second.count, it->second.last_use, key.packed()});
  entries_.erase(it);
}

Status LfuPolicy::choose_victim(ExpertKey, const k3::sdk::VictimQuery& query, ExpertKey& victim) noexcept {
  if (order_.empty()) return Status::error(StatusCode::not_found, "lfu: no resident key to evict");
  for (const Rank& r : order_) {
    const ExpertKey k = ExpertKey::unpack(r.key);
    if (query.evictable(k)) {
      victim = k;
      return Status::success();
    }
  }
  return Status::error(StatusCode::not_found, "lfu: every resident key is leased or pinned");
}

Status LfuPolicy::set_future(std::span<const ExpertKey>) noexcept {
  return Status::error(StatusCode::unsupported, "lfu does not use the future request stream");
}

}  // namespace k3cache
