// Independent work items over threads: the per-sequence, per-head parts of a pass (the KDA
// recurrence, MLA's attention over the cache). Each item is computed whole by one thread, in
// the same order of operations as when one thread runs them all, so the output does not
// depend on the thread count or on which thread ran an item (docs/model-spec.md §5).
//
// A pass of several sequences has many such items and, at small hidden sizes, they are most
// of a token's work (docs/benchmarks-log.md, "The trained model resident"); run on one
// thread, they left the others idle for that time. One item of one sequence is too little
// work to wake a sleeping thread for (OMP_WAIT_POLICY=passive), so a pass goes parallel only
// from Ops::threads_for's threshold on.
#pragma once
#include <omp.h>

#include <atomic>
#include <cstddef>

namespace k3::maths {

/// Calls fn(item, lane) for every item in [0, items) exactly once, on `threads` OpenMP
/// threads (Ops::threads_for); lane < threads is the calling thread's index, for its own scratch.
/// Items go out in order to whichever thread is free.
template <class Fn>
void for_items(std::size_t items, int threads, Fn&& fn) {
  if (threads <= 1) {
    for (std::size_t i = 0; i < items; ++i) fn(i, std::size_t{0});
    return;
  }
  std::atomic<std::size_t> next{0};
#pragma omp parallel num_threads(threads)
  {
    const auto lane = static_cast<std::size_t>(omp_get_thread_num());
    for (std::size_t i = next.fetch_add(1); i < items; i = next.fetch_add(1)) fn(i, lane);
  }
}

}  // namespace k3::maths
