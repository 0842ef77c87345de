// The requests that wait for the model, and the one worker thread that runs them in arrival
// order (docs/serve.md, "Concurrency, limits, timeouts"). It knows nothing of HTTP: a job
// runs on the worker thread, or is rejected (timed out while waiting, or the server stops).
// A fixed number of threads whatever --queue is: the worker and one that ends waits at
// their deadline. Continuous batching would replace the worker's one-at-a-time loop here,
// leaving the HTTP side as it is.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "serve/request.hpp"

namespace k3::serve {

class Metrics;

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
};

class GenerationQueue {
 public:
  /// `capacity` jobs may wait while one runs; `timeout_seconds` is only for the message of
  /// a job whose deadline passed in the queue.
  GenerationQueue(std::size_t capacity, double timeout_seconds, Metrics& metrics);
  ~GenerationQueue();  ///< stop(), then joins the threads
  GenerationQueue(const GenerationQueue&) = delete;
  GenerationQueue& operator=(const GenerationQueue&) = delete;

  /// Queues a job. ApiError 429 when `capacity` already wait, 503 when stopping.
  void submit(std::shared_ptr<GenerationJob> job);
  /// Refuses what waits (503 shutting_down) and stops the running job at its next token.
  /// The worker ends once that job has returned.
  void stop();
  /// Joins the threads (after stop()).
  void join();

 private:
  void work();
  void reap();
  std::size_t capacity_;
  double timeout_seconds_;
  Metrics& metrics_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<GenerationJob>> waiting_;
  std::shared_ptr<GenerationJob> running_;
  bool stopping_ = false;
  std::thread worker_, reaper_;
};

}  // namespace k3::serve
