// How a matrix product is split over threads (docs/model-spec.md §5: threads split output rows,
// never a reduction). Rows go out in blocks of kRowBlock; each block is computed whole by one
// thread, so the output does not depend on the thread count or on which thread ran a block.
//
// Which thread runs which block is chosen for speed, for two reasons measured on this VM
// (docs/benchmarks-log.md, "Splitting rows over threads"):
//   - The two vCPUs can run at very different speeds (one shares its physical core with
//     another guest; 9.2 vs 11.7 GB/s on the same MXFP4 kernel at the same moment), so a
//     fixed split makes the fast core wait for the slow one.
//   - A kernel prefetches ahead in its rows and into the rows of its next tile. When
//     consecutive blocks go to different threads, every block starts cold on its thread and
//     the prefetch at its end fetches rows the other thread will run: handing out single
//     blocks to whichever thread was free made MXFP4 at 2 threads 1.07-1.35x slower.
// So each thread owns a contiguous share of the blocks and runs it front to back; a thread
// whose share is empty takes the back half of the largest share left and runs that front to
// back. Streams stay long, and no thread waits while another has more than one block left.
#pragma once
#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include <k3/kernels.hpp>

namespace k3::maths {

/// Rows per block: big enough to amortise handing out, small enough to balance 2+ threads
/// (a multiple of every kernel set's row tile, 4, 6 and 8).
inline constexpr std::size_t kRowBlock = 64;

/// Blocks [0, blocks) in one contiguous share per thread, handed out front to back, with the
/// back half of the largest share going to a thread that has run out. Block numbers are kept
/// in 32 bits: up to 2^32 blocks of 64 rows. One is made per matrix product, so up to
/// kLocalShares threads the shares live in the object itself, with no heap allocation.
class BlockShares {
 public:
  BlockShares(std::size_t blocks, int threads)
      : count_(static_cast<std::size_t>(std::max(threads, 1))),
        heap_(count_ > kLocalShares ? std::make_unique<Share[]>(count_) : nullptr),
        shares_(heap_ ? heap_.get() : local_.data()) {
    for (std::size_t s = 0; s < count_; ++s)
      shares_[s].range.store(pack(blocks * s / count_, blocks * (s + 1) / count_));
  }
  BlockShares(const BlockShares&) = delete;
  BlockShares& operator=(const BlockShares&) = delete;

  /// The next block for thread t (0 <= t < threads), or nothing once every block is taken.
  std::optional<std::size_t> next(std::size_t t) {
    for (;;) {
      std::uint64_t r = shares_[t].range.load();
      while (front(r) < end(r))
        if (shares_[t].range.compare_exchange_weak(r, pack(front(r) + 1, end(r)))) return front(r);
      if (!steal_into(t)) return std::nullopt;
    }
  }

 private:
  // A share is the blocks [front, end), both in one atomic word, so the owner taking its
  // front and a thief moving its end never lose each other's update. The word says which
  // blocks of the share are still free, so a compare-exchange that succeeds is always right,
  // however the share changed in between.
  struct alignas(64) Share {
    std::atomic<std::uint64_t> range{0};
  };
  static std::uint64_t pack(std::size_t front, std::size_t end) {
    return static_cast<std::uint64_t>(front) | (static_cast<std::uint64_t>(end) << 32);
  }
  static std::size_t front(std::uint64_t r) { return static_cast<std::size_t>(r & 0xFFFFFFFFu); }
  static std::size_t end(std::uint64_t r) { return static_cast<std::size_t>(r >> 32); }

  /// Moves the back half (rounded up) of the largest share into thread `own`'s empty share;
  /// false when every share is empty.
  bool steal_into(std::size_t own) {
    for (;;) {
      std::size_t victim = count_;
      std::size_t most = 0;
      for (std::size_t v = 0; v < count_; ++v) {
        const std::uint64_t r = shares_[v].range.load();
        if (end(r) - front(r) > most) {
          most = end(r) - front(r);
          victim = v;
        }
      }
      if (victim == count_) return false;
      std::uint64_t r = shares_[victim].range.load();
      const std::size_t left = end(r) - front(r);
      if (left == 0) continue;
      const std::size_t mid = end(r) - (left + 1) / 2;
      if (shares_[victim].range.compare_exchange_strong(r, pack(front(r), mid))) {
        // `own` is empty, and only its owner (this thread) ever grows it: nothing is lost.
        shares_[own].range.store(pack(mid, end(r)));
        return true;
      }
    }
  }

  static constexpr std::size_t kLocalShares = 16;
  std::size_t count_;
  std::array<Share, kLocalShares> local_{};
  std::unique_ptr<Share[]> heap_;
  Share* shares_;
};

/// Calls fn(RowRange) for consecutive blocks of kRowBlock rows covering [0, rows), on up to
/// `threads` OpenMP threads; every block exactly once.
template <class Fn>
void for_row_blocks(std::size_t rows, int threads, Fn&& fn) {
  const std::size_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  if (threads <= 1 || blocks <= 1) {
    fn(sdk::RowRange{0, rows});
    return;
  }
  BlockShares shares(blocks, threads);
#pragma omp parallel num_threads(threads)
  {
    // A team smaller than asked for leaves some shares without an owner: the others take them.
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
    while (const std::optional<std::size_t> b = shares.next(t)) {
      const std::size_t begin = *b * kRowBlock;
      fn(sdk::RowRange{begin, std::min(rows, begin + kRowBlock)});
    }
  }
}

}  // namespace k3::maths
