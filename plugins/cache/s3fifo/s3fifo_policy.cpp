#include "s3fifo_policy.hpp"

#include <algorithm>
#include <cmath>
#include <new>
#include <string>

namespace k3cache {

using k3::sdk::ExpertKey;
using k3::sdk::Status;
using k3::sdk::StatusCode;

namespace {
constexpr std::uint8_t kMaxFreq = 3;  // 2-bit saturating counter
}  // namespace

Status S3FifoPolicy::reset(std::uint64_t capacity_slots) noexcept {
  if (capacity_slots == 0) return Status::error(StatusCode::invalid_argument, "s3fifo: capacity must be > 0 slots");
  if (capacity_slots >= kNil) return Status::error(StatusCode::invalid_argument, "s3fifo: capacity too large");
  capacity_ = capacity_slots;
  const auto small = static_cast<std::uint64_t>(std::floor(params_.small_ratio * static_cast<double>(capacity_slots)));
  small_target_ = static_cast<std::size_t>(std::clamp<std::uint64_t>(small, 1, capacity_slots));
  main_target_ = static_cast<std::size_t>(capacity_slots) - small_target_;
  ghost_capacity_ = static_cast<std::size_t>(std::llround(params_.ghost_ratio * static_cast<double>(main_target_)));
  try {
    slab_.reset(static_cast<std::size_t>(capacity_slots));
    small_.clear();
    main_.clear();
    index_.clear();
    index_.reserve(static_cast<std::size_t>(capacity_slots));
    ghost_fifo_.clear();
    ghost_.clear();
    ghost_.reserve(ghost_capacity_);
  } catch (const std::bad_alloc&) {
    return Status::error(StatusCode::out_of_memory,
                         "s3fifo: cannot allocate state for " + std::to_string(capacity_slots) + " slots");
  }
  ghost_stamp_ = 0;
  return Status::success();
}

void S3FifoPolicy::on_access(ExpertKey key, std::uint64_t) noexcept {
  const auto it = index_.find(key.packed());
  if (it == index_.end()) return;  // a miss: on_insert follows
  Node& n = slab_[it->second];
  if (n.freq < kMaxFreq) ++n.freq;
}

void S3FifoPolicy::on_insert(ExpertKey key) noexcept {
  const std::uint64_t packed = key.packed();
  try {
    if (index_.count(packed) != 0) return;  // already resident
    const bool from_ghost = ghost_.erase(packed) != 0;
    Node init;
    init.key = packed;
    init.queue = from_ghost ? Queue::main : Queue::small;
    const std::uint32_t i = slab_.alloc(init);
    list(init.queue).push_head(slab_, i);
    index_.emplace(packed, i);
  } catch (const std::bad_alloc&) {
    // Cannot track the key: it is simply never offered as a victim.
  }
}

void S3FifoPolicy::on_remove(ExpertKey key) noexcept {
  const auto it = index_.find(key.packed());
  if (it == index_.end()) return;
  const std::uint32_t i = it->second;
  const Queue q = slab_[i].queue;
  list(q).unlink(slab_, i);
  index_.erase(it);
  try {
    slab_.release(i);
    if (q == Queue::small) remember_ghost(key.packed());
  } catch (const std::bad_alloc&) {
    // Losing a ghost entry only costs a future promotion.
  }
}

void S3FifoPolicy::remember_ghost(std::uint64_t key) {
  if (ghost_capacity_ == 0) return;
  const std::uint64_t stamp = ++ghost_stamp_;
  ghost_[key] = stamp;
  ghost_fifo_.emplace_back(key, stamp);
  const auto live = [this](const std::pair<std::uint64_t, std::uint64_t>& e) {
    const auto g = ghost_.find(e.first);
    return g != ghost_.end() && g->second == e.second;
  };
  while (ghost_.size() > ghost_capacity_) {
    const auto front = ghost_fifo_.front();
    ghost_fifo_.pop_front();
    if (live(front)) ghost_.erase(front.first);
  }
  // Entries of re-admitted keys go stale in place; compact when they dominate (amortised O(1)).
  if (ghost_fifo_.size() > 2 * ghost_capacity_ + 16) {
    std::deque<std::pair<std::uint64_t, std::uint64_t>> kept;
    for (const auto& e : ghost_fifo_)
      if (live(e)) kept.push_back(e);
    ghost_fifo_.swap(kept);
  }
}

std::optional<std::uint32_t> S3FifoPolicy::evict_small(const k3::sdk::VictimQuery& query) {
  std::uint32_t cur = small_.tail();
  while (cur != kNil) {
    Node& n = slab_[cur];
    const std::uint32_t newer = n.prev;
    if (!query.evictable(ExpertKey::unpack(n.key))) {
      cur = newer;  // leased or pinned: stays where it is
      continue;
    }
    if (n.freq < params_.move_to_main_threshold) return cur;
    small_.unlink(slab_, cur);
    n.freq = 0;
    n.queue = Queue::main;
    main_.push_head(slab_, cur);
    if (main_.size() > main_target_) {
      if (const auto v = evict_main(query)) return v;
    }
    cur = newer;
  }
  return std::nullopt;
}

std::optional<std::uint32_t> S3FifoPolicy::evict_main(const k3::sdk::VictimQuery& query) {
  // Passes from the tail toward the head. Every evictable key seen loses one count or is
  // the victim, so at most kMaxFreq + 1 passes find one; a pass that sees no evictable
  // key proves there is none.
  std::uint32_t cur = main_.tail();
  bool saw_evictable = false;
  for (;;) {
    if (cur == kNil) {
      if (!saw_evictable) return std::nullopt;
      saw_evictable = false;
      cur = main_.tail();
      continue;
    }
    Node& n = slab_[cur];
    const std::uint32_t newer = n.prev;
    if (!query.evictable(ExpertKey::unpack(n.key))) {
      cur = newer;
      continue;
    }
    saw_evictable = true;
    if (n.freq == 0) return cur;
    --n.freq;
    main_.unlink(slab_, cur);
    main_.push_head(slab_, cur);
    cur = newer;
  }
}

Status S3FifoPolicy::choose_victim(ExpertKey, const k3::sdk::VictimQuery& query, ExpertKey& victim) noexcept {
  if (index_.empty()) return Status::error(StatusCode::not_found, "s3fifo: no resident key to evict");
  const bool prefer_small = small_.size() >= small_target_ || main_.empty();
  std::optional<std::uint32_t> v = prefer_small ? evict_small(query) : evict_main(query);
  if (!v) v = prefer_small ? evict_main(query) : evict_small(query);
  if (!v) return Status::error(StatusCode::not_found, "s3fifo: every resident key is leased or pinned");
  victim = ExpertKey::unpack(slab_[*v].key);
  return Status::success();
}

Status S3FifoPolicy::set_future(std::span<const ExpertKey>) noexcept {
  return Status::error(StatusCode::unsupported, "s3fifo does not use the future request stream");
}

}  // namespace k3cache
