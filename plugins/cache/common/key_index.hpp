// A flat hash index from a packed (layer, expert) key to a 32-bit node index, for the cache
// policies. The host calls a policy on every expert request of every token, and a node-based
// map (std::unordered_map) allocates on every insert; this table is sized once by reset()
// for the policy's capacity, so steady-state finds, inserts and erases never allocate.
// Open addressing with linear probing, kept at most half full; erase shifts the following
// cells back (no tombstones), so probe lengths never degrade over a long run.
// Header-only and SDK-free, like key_list.hpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "key_list.hpp"
#include "splitmix64.hpp"

namespace k3cache {

class KeyIndex {
 public:
  /// Empties the index and sizes it for `capacity` keys. May throw std::bad_alloc.
  void reset(std::size_t capacity) {
    std::size_t cells = 16;
    while (cells < 2 * capacity) cells *= 2;
    cells_.assign(cells, Cell{});
    size_ = 0;
  }

  /// The node stored for `key`, or kNil.
  [[nodiscard]] std::uint32_t find(std::uint64_t key) const noexcept {
    if (cells_.empty()) return kNil;
    for (std::size_t i = home(key);; i = next(i)) {
      const Cell& c = cells_[i];
      if (c.node == kNil) return kNil;
      if (c.key == key) return c.node;
    }
  }

  /// Stores `node` for `key`, which must be absent. More keys than reset() was sized for
  /// make the table grow (it allocates then, and may throw std::bad_alloc).
  void insert(std::uint64_t key, std::uint32_t node) {
    if (2 * (size_ + 1) > cells_.size()) grow();
    place(key, node);
    ++size_;
  }

  /// Forgets `key` (absent: nothing happens).
  void erase(std::uint64_t key) noexcept {
    if (cells_.empty()) return;
    std::size_t hole = home(key);
    for (;; hole = next(hole)) {
      if (cells_[hole].node == kNil) return;
      if (cells_[hole].key == key) break;
    }
    // Backward shift: move each later cell of the cluster into the hole unless its home
    // lies cyclically in (hole, i], where it would no longer be found.
    for (std::size_t i = next(hole);; i = next(i)) {
      const Cell& c = cells_[i];
      if (c.node == kNil) break;
      const std::size_t h = home(c.key);
      const bool stays = hole <= i ? (hole < h && h <= i) : (hole < h || h <= i);
      if (stays) continue;
      cells_[hole] = c;
      hole = i;
    }
    cells_[hole] = Cell{};
    --size_;
  }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  struct Cell {
    std::uint64_t key = 0;
    std::uint32_t node = kNil;  ///< kNil: the cell is empty
  };

  /// splitmix64's finaliser: packed keys differ mostly in their low bits of each half.
  [[nodiscard]] std::size_t home(std::uint64_t key) const noexcept {
    return static_cast<std::size_t>(mix64(key)) & (cells_.size() - 1);
  }
  [[nodiscard]] std::size_t next(std::size_t i) const noexcept { return (i + 1) & (cells_.size() - 1); }

  void place(std::uint64_t key, std::uint32_t node) noexcept {
    std::size_t i = home(key);
    while (cells_[i].node != kNil) i = next(i);
    cells_[i] = {key, node};
  }

  void grow() {
    const std::vector<Cell> previous =
        std::exchange(cells_, std::vector<Cell>(cells_.empty() ? 16 : cells_.size() * 2));
    for (const Cell& c : previous)
      if (c.node != kNil) place(c.key, c.node);
  }

  std::vector<Cell> cells_;  // a power of two in size
  std::size_t size_ = 0;
};

}  // namespace k3cache
