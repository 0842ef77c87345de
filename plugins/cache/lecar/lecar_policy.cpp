#include "lecar_policy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>
#include <string>

namespace k3cache {

using k3::sdk::ExpertKey;
using k3::sdk::Status;
using k3::sdk::StatusCode;

namespace {
// A prefetched key that was never accessed ranks below every counted key in the LFU order.
constexpr double kNeverAccessed = -std::numeric_limits<double>::infinity();
}  // namespace

Status LecarPolicy::reset(std::uint64_t capacity_slots) noexcept {
  if (capacity_slots == 0) return Status::error(StatusCode::invalid_argument, "lecar: capacity must be > 0 slots");
  const auto cap = static_cast<std::size_t>(capacity_slots);
  const auto history = static_cast<std::size_t>(std::ceil(params_.history_ratio * static_cast<double>(cap)));
  try {
    slab_.reset(cap);
    lru_.clear();
    index_.reset(cap);
    heap_.clear();
    heap_.reserve(cap);
    search_.clear();
    search_.reserve(cap);
    history_.assign(history, Ghost{});
    history_index_.reset(history);
    missed_.reset(64);
  } catch (const std::bad_alloc&) {
    return Status::error(StatusCode::out_of_memory,
                         "lecar: cannot allocate state for " + std::to_string(capacity_slots) + " slots");
  }
  capacity_ = capacity_slots;
  clock_ = 0;
  rng_.seed(params_.seed);
  halflife_requests_ = std::max(1.0, params_.halflife * static_cast<double>(cap));
  discount_ = std::pow(0.005, 1.0 / static_cast<double>(cap));
  w_lru_ = 0.5;
  history_next_ = 0;
  have_victim_ = false;
  return Status::success();
}

double LecarPolicy::bumped(double score) const noexcept {
  // log2(2^score + 2^(clock / half-life)), computed around the larger term.
  const double now = static_cast<double>(clock_) / halflife_requests_;
  if (score == kNeverAccessed) return now;
  const double hi = std::max(score, now), lo = std::min(score, now);
  return hi + std::log2(1.0 + std::exp2(lo - hi));
}

void LecarPolicy::on_access(ExpertKey key, std::uint64_t) noexcept {
  const std::uint64_t packed = key.packed();
  ++clock_;
  const std::uint32_t node = index_.find(packed);
  if (node != kNil) {
    Node& n = slab_[node];
    lru_.unlink(slab_, node);
    lru_.push_head(slab_, node);
    n.last_use = clock_;
    n.score = bumped(n.score);
    sift_down(n.heap_pos);  // the score only grows
    return;
  }
  // A miss: on_insert follows (in this group). Count the access for it.
  const std::uint32_t pending = missed_.find(packed);
  try {
    if (pending == kNil) {
      missed_.insert(packed, 1);
    } else {
      missed_.erase(packed);
      missed_.insert(packed, pending + 1);
    }
  } catch (const std::bad_alloc&) {
  }
  // Regret: the expert that evicted this key was wrong; the other one gains weight.
  const std::uint32_t slot = history_index_.find(packed);
  if (slot == kNil) return;
  Ghost& g = history_[slot];
  if (g.expert == kNone) return;
  const double reward =
      std::exp(params_.learning_rate * std::pow(discount_, static_cast<double>(clock_ - g.evicted_at)));
  double w_lru = w_lru_, w_lfu = 1.0 - w_lru_;
  if (g.expert == kLru)
    w_lfu *= reward;
  else
    w_lru *= reward;
  w_lru_ = w_lru / (w_lru + w_lfu);
  // Keep the weights away from 0 and 1 so that a wrong expert can win its way back.
  w_lru_ = std::clamp(w_lru_, 0.01, 0.99);
  g.expert = kNone;  // one lesson per eviction
}

void LecarPolicy::on_insert(ExpertKey key) noexcept {
  const std::uint64_t packed = key.packed();
  if (index_.find(packed) != kNil) return;  // already resident
  Node n;
  n.key = packed;
  n.score = kNeverAccessed;
  const std::uint32_t slot = history_index_.find(packed);
  if (slot != kNil) {  // back from HISTORY: its count comes back too
    n.score = history_[slot].score;
    history_[slot].live = false;
    history_index_.erase(packed);
  }
  const std::uint32_t accesses = missed_.find(packed);
  if (accesses != kNil) {
    missed_.erase(packed);
    for (std::uint32_t i = 0; i < accesses; ++i) n.score = bumped(n.score);
    n.last_use = clock_;
  } else {
    n.last_use = ++clock_;  // a prefetch: inserted now, never accessed
  }
  try {
    const std::uint32_t node = slab_.alloc(n);
    index_.insert(packed, node);
    lru_.push_head(slab_, node);
    heap_.push_back(node);
    slab_[node].heap_pos = static_cast<std::uint32_t>(heap_.size() - 1);
    sift_up(heap_.size() - 1);
  } catch (const std::bad_alloc&) {
    // Not tracked: it cannot be chosen as a victim; the host evicts other keys.
  }
}

void LecarPolicy::remember(const Node& n, Expert by) noexcept {
  if (history_.empty()) return;
  Ghost& g = history_[history_next_];
  if (g.live && history_index_.find(g.key) == history_next_) history_index_.erase(g.key);
  if (history_index_.find(n.key) != kNil) history_index_.erase(n.key);
  g = Ghost{n.key, clock_, n.score, by, true};
  try {
    history_index_.insert(n.key, static_cast<std::uint32_t>(history_next_));
  } catch (const std::bad_alloc&) {
    g.live = false;
  }
  history_next_ = (history_next_ + 1) % history_.size();
}

void LecarPolicy::on_remove(ExpertKey key) noexcept {
  const std::uint64_t packed = key.packed();
  const std::uint32_t node = index_.find(packed);
  if (node == kNil) return;
  const Expert by = have_victim_ && last_victim_ == packed ? last_expert_ : kNone;
  have_victim_ = false;
  remember(slab_[node], by);
  lru_.unlink(slab_, node);
  heap_remove(node);
  index_.erase(packed);
  slab_.release(node);
}

bool LecarPolicy::heap_less(std::uint32_t a, std::uint32_t b) const noexcept {
  const Node& x = slab_[a];
  const Node& y = slab_[b];
  if (x.score != y.score) return x.score < y.score;
  if (x.last_use != y.last_use) return x.last_use < y.last_use;
  return x.key < y.key;
}

void LecarPolicy::heap_swap(std::size_t i, std::size_t j) noexcept {
  std::swap(heap_[i], heap_[j]);
  slab_[heap_[i]].heap_pos = static_cast<std::uint32_t>(i);
  slab_[heap_[j]].heap_pos = static_cast<std::uint32_t>(j);
}

void LecarPolicy::sift_up(std::size_t i) noexcept {
  while (i > 0) {
    const std::size_t parent = (i - 1) / 2;
    if (!heap_less(heap_[i], heap_[parent])) break;
    heap_swap(i, parent);
    i = parent;
  }
}

void LecarPolicy::sift_down(std::size_t i) noexcept {
  for (;;) {
    const std::size_t l = 2 * i + 1, r = l + 1;
    std::size_t m = i;
    if (l < heap_.size() && heap_less(heap_[l], heap_[m])) m = l;
    if (r < heap_.size() && heap_less(heap_[r], heap_[m])) m = r;
    if (m == i) return;
    heap_swap(i, m);
    i = m;
  }
}

void LecarPolicy::heap_remove(std::uint32_t node) noexcept {
  const std::size_t i = slab_[node].heap_pos;
  const std::size_t last = heap_.size() - 1;
  if (i != last) heap_swap(i, last);
  heap_.pop_back();
  slab_[node].heap_pos = kNil;
  if (i < heap_.size()) {
    sift_up(i);
    sift_down(slab_[heap_[i]].heap_pos);
  }
}

std::uint32_t LecarPolicy::lru_candidate(const k3::sdk::VictimQuery& query) const noexcept {
  for (std::uint32_t i = lru_.tail(); i != kNil; i = slab_[i].prev)
    if (query.evictable(ExpertKey::unpack(slab_[i].key))) return i;
  return kNil;
}

std::uint32_t LecarPolicy::lfu_candidate(const k3::sdk::VictimQuery& query) noexcept {
  // Best-first walk of the heap: the smallest key overall that is evictable, visiting only
  // the leased keys above it (search_ is a min-heap of heap positions).
  if (heap_.empty()) return kNil;
  search_.clear();
  search_.push_back(0);
  const auto later = [this](std::uint32_t a, std::uint32_t b) { return heap_less(heap_[b], heap_[a]); };
  while (!search_.empty()) {
    std::pop_heap(search_.begin(), search_.end(), later);
    const std::uint32_t pos = search_.back();
    search_.pop_back();
    const std::uint32_t node = heap_[pos];
    if (query.evictable(ExpertKey::unpack(slab_[node].key))) return node;
    for (const std::size_t child : {2 * std::size_t{pos} + 1, 2 * std::size_t{pos} + 2}) {
      if (child >= heap_.size()) continue;
      search_.push_back(static_cast<std::uint32_t>(child));  // within the reserved capacity
      std::push_heap(search_.begin(), search_.end(), later);
    }
  }
  return kNil;
}

double LecarPolicy::next_unit() noexcept { return rng_.unit(); }

Status LecarPolicy::choose_victim(ExpertKey, const k3::sdk::VictimQuery& query, ExpertKey& victim) noexcept {
  const std::uint32_t by_lru = lru_candidate(query);
  if (by_lru == kNil) return Status::error(StatusCode::not_found, "lecar: no resident key is evictable");
  const std::uint32_t by_lfu = lfu_candidate(query);
  const bool use_lru = next_unit() < w_lru_;
  const std::uint32_t node = use_lru || by_lfu == kNil ? by_lru : by_lfu;
  last_victim_ = slab_[node].key;
  last_expert_ = by_lru == by_lfu ? kNone : (node == by_lru ? kLru : kLfu);
  have_victim_ = true;
  victim = ExpertKey::unpack(last_victim_);
  return Status::success();
}

Status LecarPolicy::set_future(std::span<const ExpertKey>) noexcept {
  return Status::error(StatusCode::unsupported, "lecar does not use the future request stream");
}

}  // namespace k3cache
