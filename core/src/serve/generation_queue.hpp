// The requests that wait for a sequence slot of the model, and the workers that run them in
// arrival order, one per slot (docs/serve.md, "Concurrency, limits, timeouts"). A worker's
// job joins the engine's step scheduler and waits until its sequence is done, so up to
// serve.parallel requests are decoded together. It knows nothing of HTTP: a job runs on a
// worker, or is rejected (timed out while waiting, or the server stops). A fixed number of
// threads whatever --queue is: the workers (serve.parallel) and one that ends waits at
// their deadline.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "serve/request.hpp"

namespace k3::serve {

class Metrics;
class LatencyMetrics;

class GenerationJob {
 public:
  virtual ~GenerationJob() = default;
  /// On the worker thread, holding the model. Whatever it throws is logged and dropped: it
  /// answers its client itself.
  virtual void run() = 0;
  /// Instead of run(): the deadline passed while it waited, or the server stops.
  virtual void reject(const ApiError& error) = 0;
  /// Set from any thread to end the run at its next boundary (a prefill chunk or a token).
  std::atomic<bool> stop{false};
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::chrono::steady_clock::time_point submitted{};  ///< set by submit()
};

class GenerationQueue {
 public:
  /// `capacity` jobs may wait while every worker runs one; `timeout_seconds` is only for
  /// the message of a job whose deadline passed in the queue.
  GenerationQueue(std::size_t capacity, double timeout_seconds, Metrics& metrics, LatencyMetrics& latency);
  ~GenerationQueue();  ///< stop(), then joins the threads
  GenerationQueue(const GenerationQueue&) = delete;
  GenerationQueue& operator=(const GenerationQueue&) = delete;

  /// Starts `workers` workers (once, when the model is loaded: one per sequence slot).
  void start(std::size_t workers);
  /// Queues a job. ApiError 429 when `capacity` already wait, 503 when stopping.
  void submit(std::shared_ptr<GenerationJob> job);
  /// Refuses what waits (503 shutting_down) and stops the running jobs at their next token.
  /// The workers end once those jobs have returned.
  void stop();
  /// Joins the threads (after stop()).
  void join();

 private:
  void work();
  void reap();
  std::size_t capacity_;
  double timeout_seconds_;
  Metrics& metrics_;
  LatencyMetrics& latency_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<GenerationJob>> waiting_;
  std::vector<std::shared_ptr<GenerationJob>> running_;
  std::size_t workers_started_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
  std::thread reaper_;
};

}  // namespace k3::serve
