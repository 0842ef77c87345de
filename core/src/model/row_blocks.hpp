// How a matrix product is split over threads (K3-MODEL.md §5: threads split output rows,
// never a reduction). Rows go out in blocks of kRowBlock, handed to whichever thread is free
// next, so the output does not depend on the thread count or on which thread ran a block.
//
// Why dynamic and not equal halves: on a VM the two vCPUs can run at very different speeds
// (one shares its physical core with another guest; measured 9.2 vs 11.7 GB/s on the same
// MXFP4 kernel at the same moment). Equal halves make the fast core wait for the slow one;
// blocks handed out as threads free up use both fully.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstddef>

#include <k3/kernels.hpp>

namespace k3::model {

/// Rows per block: big enough to amortise handing out, small enough to balance 2+ threads
/// (a multiple of every kernel set's row tile, 4, 6 and 8).
inline constexpr std::size_t kRowBlock = 64;

/// Calls fn(RowRange) for consecutive blocks of kRowBlock rows covering [0, rows), on up to
/// `threads` OpenMP threads.
template <class Fn>
void for_row_blocks(std::size_t rows, int threads, Fn&& fn) {
  const std::size_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  if (threads <= 1 || blocks <= 1) {
    fn(sdk::RowRange{0, rows});
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(dynamic)
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t begin = b * kRowBlock;
    fn(sdk::RowRange{begin, std::min(rows, begin + kRowBlock)});
  }
}

}  // namespace k3::model
