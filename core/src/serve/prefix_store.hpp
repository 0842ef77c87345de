// The server's snapshot store for prefix reuse: session snapshots keyed by the tokens they
// hold, found by the longest one that is a prefix of a new request's ids, and bounded by a
// byte budget (least recently used dropped first). A template over the snapshot type so the
// bookkeeping is tested without a model; Snap needs tokens() (a vector of ids) and bytes().
// Not thread-safe: the server uses it from the one generation at a time.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <utility>
#include <vector>

namespace k3::serve {

template <class Snap>
class PrefixStore {
 public:
  explicit PrefixStore(std::size_t budget_bytes) : budget_(budget_bytes) {}

  /// Keeps `snap` as the most recently used entry; an entry with the same tokens is replaced.
  /// Older entries are dropped until the total fits the budget; a snapshot larger than the
  /// whole budget is not kept. Returns whether it was kept.
  bool put(Snap snap) {
    const auto& key = snap.tokens();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->tokens() == key) {
        used_ -= it->bytes();
        entries_.erase(it);
        break;
      }
    if (snap.bytes() > budget_) return false;
    used_ += snap.bytes();
    entries_.push_front(std::move(snap));
    while (used_ > budget_) {
      used_ -= entries_.back().bytes();
      entries_.pop_back();
      ++evictions_;
    }
    return true;
  }

  /// The entry with the most tokens that is a prefix of `ids` and holds at most `max_len`
  /// tokens (nullptr when none); it becomes the most recently used. The pointer stays valid
  /// until the next put().
  const Snap* longest_prefix(std::span<const std::uint32_t> ids, std::size_t max_len) {
    auto best = entries_.end();
    std::size_t best_len = 0;
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      const auto& t = it->tokens();
      if (t.empty() || t.size() > max_len || t.size() > ids.size() || t.size() <= best_len) continue;
      if (std::equal(t.begin(), t.end(), ids.begin())) {
        best = it;
        best_len = t.size();
      }
    }
    if (best == entries_.end()) return nullptr;
    entries_.splice(entries_.begin(), entries_, best);
    return &entries_.front();
  }

  [[nodiscard]] std::size_t bytes() const noexcept { return used_; }
  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }
  [[nodiscard]] std::size_t budget() const noexcept { return budget_; }
  [[nodiscard]] std::uint64_t evictions() const noexcept { return evictions_; }
  void clear() noexcept {
    entries_.clear();
    used_ = 0;
  }

 private:
  std::size_t budget_;
  std::size_t used_ = 0;
  std::uint64_t evictions_ = 0;
  std::list<Snap> entries_;  ///< most recently used first
};

}  // namespace k3::serve
