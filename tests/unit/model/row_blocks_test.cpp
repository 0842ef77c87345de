// How rows are split over threads (core/src/maths/row_blocks.hpp): every block exactly once,
// each thread's own share front to back, and a thread that runs out takes work from the
// back of the largest share left.
#include <omp.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "maths/parallel_items.hpp"
#include "maths/row_blocks.hpp"

using k3::maths::BlockShares;
using k3::maths::for_row_blocks;
using k3::maths::kRowBlock;

TEST_CASE("one thread runs its share front to back, then halves of the others' from the back", "[model][row_blocks]") {
  // 10 blocks, 2 shares: [0,5) and [5,10). Thread 0 alone: its share, then the back half
  // (rounded up) of what is left of share 1: [7,10), then [6,7), then [5,6).
  BlockShares shares(10, 2);
  std::vector<std::size_t> order;
  while (const auto b = shares.next(0)) order.push_back(*b);
  CHECK(order == std::vector<std::size_t>{0, 1, 2, 3, 4, 7, 8, 9, 6, 5});
  CHECK_FALSE(shares.next(1).has_value());
}

TEST_CASE("shares without a running owner are taken by the others", "[model][row_blocks]") {
  for (const int threads : {5, 20}) {  // 20 keeps its shares on the heap
    BlockShares shares(37, threads);
    std::vector<int> seen(37, 0);
    while (const auto b = shares.next(2)) ++seen.at(*b);
    for (std::size_t b = 0; b < seen.size(); ++b) {
      INFO(threads << " shares, block " << b);
      CHECK(seen[b] == 1);
    }
  }
}

TEST_CASE("every row is computed exactly once for any row count and thread count", "[model][row_blocks]") {
  for (const std::size_t rows : {std::size_t{1}, std::size_t{63}, std::size_t{64}, std::size_t{65}, std::size_t{896},
                                 std::size_t{3072}, std::size_t{12345}}) {
    for (const int threads : {1, 2, 3, 4, 7, 20}) {  // 20: past the shares kept in the object
      std::vector<std::atomic<int>> hits(rows);
      std::atomic<int> bad_ranges{0};
      for_row_blocks(rows, threads, [&](k3::sdk::RowRange r) {
        // A range is one whole block (or all rows on one thread), never empty or past the end.
        if (r.begin >= r.end || r.end > rows || (threads > 1 && r.end - r.begin > kRowBlock)) ++bad_ranges;
        for (std::size_t i = r.begin; i < r.end && i < rows; ++i) ++hits[i];
      });
      INFO(rows << " rows on " << threads << " threads");
      CHECK(bad_ranges.load() == 0);
      std::size_t wrong = 0;
      for (const auto& h : hits) wrong += h.load() != 1;
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("a slow thread's blocks are taken over by the fast one", "[model][row_blocks]") {
  // 64 blocks on 2 threads: each owns 32. Thread 0 sleeps 5 ms per block, so thread 1 must
  // run far more than its own 32 (it steals from the back of thread 0's share).
  const std::size_t rows = 64 * kRowBlock;
  std::vector<std::atomic<int>> hits(rows);
  std::atomic<int> by_thread[2] = {0, 0};
  int team = 0;
  for_row_blocks(rows, 2, [&](k3::sdk::RowRange r) {
    const int t = omp_get_thread_num();
    if (t == 0) team = omp_get_num_threads();
    if (t == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ++by_thread[t == 0 ? 0 : 1];
    for (std::size_t i = r.begin; i < r.end; ++i) ++hits[i];
  });
  std::size_t wrong = 0;
  for (const auto& h : hits) wrong += h.load() != 1;
  CHECK(wrong == 0);
  if (team < 2) {
    WARN("SKIPPED the balance check: OpenMP gave a team of " << team << " thread(s), not 2");
    return;
  }
  CHECK(by_thread[0].load() + by_thread[1].load() == 64);
  CHECK(by_thread[1].load() > 48);
}

TEST_CASE("independent items run exactly once each, every lane below the thread count", "[model][row_blocks]") {
  // maths/parallel_items.hpp: the KDA and MLA (sequence, head) items. A lane indexes the
  // thread's own scratch, so one at or past the thread count would write past the buffers.
  for (const std::size_t items : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{5}, std::size_t{97}}) {
    for (const int threads : {1, 2, 3, 8}) {
      std::vector<std::atomic<int>> hits(items);
      std::atomic<int> bad_lanes{0};
      k3::maths::for_items(items, threads, [&](std::size_t i, std::size_t lane) {
        if (lane >= static_cast<std::size_t>(threads)) ++bad_lanes;
        ++hits.at(i);
      });
      INFO(items << " items on " << threads << " threads");
      CHECK(bad_lanes.load() == 0);
      std::size_t wrong = 0;
      for (const auto& h : hits) wrong += h.load() != 1;
      CHECK(wrong == 0);
    }
  }
}
