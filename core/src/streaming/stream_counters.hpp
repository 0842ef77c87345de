// Counters the streaming sources update from the compute thread and their reader threads;
// Model::stream_stats() copies them out.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace k3::streaming {

struct StreamCounters {
  std::atomic<std::uint64_t> trunk_bytes{0};
  std::atomic<std::uint64_t> expert_bytes{0};
  std::atomic<std::uint64_t> table_bytes{0};  ///< embedding rows and lm_head
  std::atomic<std::uint64_t> expert_requests{0};
  std::atomic<std::uint64_t> expert_hits{0};
  // Router lookahead (cache.prefetch, docs/cache.md "Router-lookahead prefetch"). A request
  // served by a prefetched expert is a prefetch hit, never an expert hit.
  std::atomic<std::uint64_t> prefetch_experts{0};     ///< experts read ahead (issued)
  std::atomic<std::uint64_t> prefetch_bytes{0};       ///< their bytes
  std::atomic<std::uint64_t> prefetch_used{0};        ///< prefetched experts later requested
  std::atomic<std::uint64_t> prefetch_used_bytes{0};  ///< their bytes
  std::atomic<std::uint64_t> prefetch_hits{0};        ///< requests served by a prefetched expert
  // The predictor's accuracy, per (chunk, predicted layer), over distinct experts:
  // recall = correct / routed, precision = correct / predicted.
  std::atomic<std::uint64_t> lookahead_predicted{0};
  std::atomic<std::uint64_t> lookahead_routed{0};
  std::atomic<std::uint64_t> lookahead_correct{0};
  std::atomic<std::uint64_t> io_wait_ns{0};      ///< compute thread blocked on storage
  std::atomic<std::uint64_t> expert_wait_ns{0};  ///< of io_wait_ns: waiting for routed experts
  std::atomic<std::uint64_t> read_ns{0};         ///< inside storage reads, any thread
  std::atomic<std::uint64_t> verify_ns{0};       ///< checking packed-trunk bytes against trunk.json, any thread

  std::mutex failures_mutex;
  std::vector<std::string> expert_failures;  ///< "layer L expert E: detail"

  void add_failure(std::string what) {
    std::lock_guard<std::mutex> lk(failures_mutex);
    expert_failures.push_back(std::move(what));
  }
};

/// Adds the time since construction to a nanosecond counter.
class ScopedTimer {
 public:
  explicit ScopedTimer(std::atomic<std::uint64_t>& into) : into_(into), t0_(std::chrono::steady_clock::now()) {}
  ~ScopedTimer() {
    into_ += static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_).count());
  }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  std::atomic<std::uint64_t>& into_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace k3::streaming
