// Building blocks shared by the queue-based cache policies (s3fifo, sieve): a slab of
// nodes addressed by 32-bit index and an intrusive doubly linked list over that slab.
// Header-only and SDK-free, so every policy plugin compiles its own copy (plugins never
// share code at run time). Indices, not pointers: the slab may grow without invalidating
// links, and a node costs 8 bytes of links instead of 16.
//
// Orientation used by every list: head = newest (where inserts go), tail = oldest (where
// eviction scans start); `prev` points toward the head (newer), `next` toward the tail
// (older), so a scan from the tail walks `prev`.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace k3cache {

inline constexpr std::uint32_t kNil = 0xFFFFFFFFu;

/// Owns nodes of type Node (which must have `std::uint32_t prev, next`), recycling freed
/// indices. Capacity is reserved up front by reset() so steady-state operation never
/// allocates.
template <class Node>
class NodeSlab {
 public:
  void reset(std::size_t reserve) {
    nodes_.clear();
    free_.clear();
    nodes_.reserve(reserve);
    free_.reserve(reserve);
  }
  std::uint32_t alloc(const Node& init) {
    if (!free_.empty()) {
      const std::uint32_t i = free_.back();
      free_.pop_back();
      nodes_[i] = init;
      return i;
    }
    nodes_.push_back(init);
    return static_cast<std::uint32_t>(nodes_.size() - 1);
  }
  void release(std::uint32_t i) { free_.push_back(i); }
  Node& operator[](std::uint32_t i) noexcept { return nodes_[i]; }
  const Node& operator[](std::uint32_t i) const noexcept { return nodes_[i]; }

 private:
  std::vector<Node> nodes_;
  std::vector<std::uint32_t> free_;
};

/// A list threaded through a NodeSlab. head = newest, tail = oldest; `prev` links point
/// toward the head, `next` links toward the tail.
template <class Node>
class KeyList {
 public:
  [[nodiscard]] std::uint32_t head() const noexcept { return head_; }
  [[nodiscard]] std::uint32_t tail() const noexcept { return tail_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  void clear() noexcept {
    head_ = tail_ = kNil;
    size_ = 0;
  }

  void push_head(NodeSlab<Node>& slab, std::uint32_t i) noexcept {
    Node& n = slab[i];
    n.prev = kNil;
    n.next = head_;
    if (head_ != kNil) slab[head_].prev = i;
    head_ = i;
    if (tail_ == kNil) tail_ = i;
    ++size_;
  }
  void unlink(NodeSlab<Node>& slab, std::uint32_t i) noexcept {
    Node& n = slab[i];
    if (n.prev != kNil)
      slab[n.prev].next = n.next;
    else
      head_ = n.next;
    if (n.next != kNil)
      slab[n.next].prev = n.prev;
    else
      tail_ = n.prev;
    n.prev = n.next = kNil;
    --size_;
  }

 private:
  std::uint32_t head_ = kNil;
  std::uint32_t tail_ = kNil;
  std::size_t size_ = 0;
};

}  // namespace k3cache
