// The queue in front of the model (generation_queue.hpp): a free worker runs the oldest
// job; the reaper rejects a waiting job when its deadline passes (every worker may be inside
// a long generation then). Jobs are answered outside the lock.
#include "serve/generation_queue.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <k3/log.hpp>

#include "serve/latency_metrics.hpp"
#include "serve/metrics.hpp"

namespace k3::serve {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

GenerationQueue::GenerationQueue(std::size_t capacity, double timeout_seconds, Metrics& metrics,
                                 LatencyMetrics& latency)
    : capacity_(capacity), timeout_seconds_(timeout_seconds), metrics_(metrics), latency_(latency) {
  reaper_ = std::thread([this] { reap(); });
}

void GenerationQueue::start(std::size_t workers) {
  std::lock_guard lock(m_);
  if (stopping_ || workers_started_ != 0) return;
  workers_started_ = std::max<std::size_t>(1, workers);
  running_.reserve(workers_started_);
  for (std::size_t i = 0; i < workers_started_; ++i) workers_.emplace_back([this] { work(); });
}

GenerationQueue::~GenerationQueue() {
  stop();
  join();
}

void GenerationQueue::submit(std::shared_ptr<GenerationJob> job) {
  {
    std::lock_guard lock(m_);
    if (stopping_) throw ApiError(503, "The server is shutting down.", "server_error", "", "shutting_down");
    // Every worker busy (or about to be) and `capacity` waiting already.
    if (running_.size() + waiting_.size() >= workers_started_ + capacity_) {
      metrics_.count_rejected();
      throw ApiError(429,
                     "The server is busy: " + std::to_string(capacity_) +
                         " requests are already waiting for the model. Retry later.",
                     "rate_limit_error", "", "queue_full");
    }
    job->submitted = Clock::now();
    waiting_.push_back(std::move(job));
    metrics_.set_queue(waiting_.size());
  }
  cv_.notify_all();
}

void GenerationQueue::stop() {
  std::deque<std::shared_ptr<GenerationJob>> refused;
  {
    std::lock_guard lock(m_);
    stopping_ = true;
    refused.swap(waiting_);
    metrics_.set_queue(0);
    for (const auto& job : running_) job->stop.store(true);
  }
  cv_.notify_all();
  const ApiError e(503, "The server is shutting down.", "server_error", "", "shutting_down");
  for (auto& job : refused) job->reject(e);
}

void GenerationQueue::join() {
  for (auto& w : workers_)
    if (w.joinable()) w.join();
  if (reaper_.joinable()) reaper_.join();
}

void GenerationQueue::work() {
  for (;;) {
    std::shared_ptr<GenerationJob> job;
    {
      std::unique_lock lock(m_);
      cv_.wait(lock, [&] { return stopping_ || !waiting_.empty(); });
      if (stopping_) return;
      job = std::move(waiting_.front());
      waiting_.pop_front();
      running_.push_back(job);
      metrics_.set_queue(waiting_.size());
      metrics_.set_running(true);
    }
    latency_.observe_queue_wait(std::chrono::duration<double>(Clock::now() - job->submitted).count());
    try {
      job->run();
    } catch (const std::exception& e) {
      log(LogLevel::error, "serve", std::string("request failed: ") + e.what());
    }
    {
      std::lock_guard lock(m_);
      running_.erase(std::find(running_.begin(), running_.end(), job));
      metrics_.set_running(!running_.empty());
    }
    cv_.notify_all();
  }
}

void GenerationQueue::reap() {
  std::unique_lock lock(m_);
  while (!stopping_) {
    auto next = Clock::time_point::max();
    for (const auto& j : waiting_) next = std::min(next, j->deadline);
    if (next == Clock::time_point::max())
      cv_.wait(lock);
    else
      cv_.wait_until(lock, next);
    if (stopping_) return;
    const auto now = Clock::now();
    std::vector<std::shared_ptr<GenerationJob>> expired;
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if ((*it)->deadline <= now) {
        expired.push_back(std::move(*it));
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
    if (expired.empty()) continue;
    metrics_.set_queue(waiting_.size());
    lock.unlock();
    const ApiError e(503,
                     "Timed out waiting for the model (request timeout " +
                         std::to_string(static_cast<long long>(timeout_seconds_)) + " s).",
                     "server_error", "", "timeout");
    for (auto& job : expired) job->reject(e);
    lock.lock();
  }
}

}  // namespace k3::serve
