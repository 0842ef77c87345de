// One background reader thread, as the trunk ring, the row chunks and the expert cache each
// run: jobs go into a queue under a lock the consumer shares; the thread runs each job
// outside the lock, then publishes its outcome under the lock and wakes every waiter. An
// exception a job throws is handed to publish(), which leaves it where the consumer will
// rethrow it; the thread itself never dies of one. Stopping (or destroying) wakes the thread
// and joins it; jobs still queued are dropped.
//
// The queue is a ring sized at start(): pushing allocates only when more jobs are queued at
// once than that, so the per-token path does not allocate. A second ring holds low-priority
// jobs (push_low(): the expert cache's prefetches). Without a low worker they run only when
// no ordinary job waits; with one (start()'s `low_work`), a second thread runs them and the
// first runs only ordinary jobs, so a read the compute waits for never queues behind a
// guess already being read (the storage serves both at once). work() and publish() are set
// once, at start(); a job is a plain value moved through the ring, never a new callable.
#pragma once
#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace k3::util {

template <class Job>
class ReaderThread {
 public:
  /// On the reader thread, without the lock; may throw.
  using Work = std::function<void(Job&)>;
  /// On the reader thread, with the lock held, after work(): `error` is what work() threw
  /// (null when it returned). Must not throw.
  using Publish = std::function<void(Job&, std::exception_ptr error)>;

  ReaderThread() = default;
  ~ReaderThread() { stop(); }
  ReaderThread(const ReaderThread&) = delete;
  ReaderThread& operator=(const ReaderThread&) = delete;

  /// Starts the thread with room for `capacity` queued jobs; with `low_work`, also a
  /// second thread that runs the low-priority jobs with it (publish() is shared).
  void start(std::size_t capacity, Work work, Publish publish, Work low_work = {}) {
    high_.ring.resize(std::max<std::size_t>(1, capacity));
    low_.ring.resize(std::max<std::size_t>(1, capacity));
    work_ = std::move(work);
    low_work_ = std::move(low_work);
    publish_ = std::move(publish);
    thread_ = std::thread([this] { loop(false); });
    if (low_work_) low_thread_ = std::thread([this] { loop(true); });
  }

  /// Wakes the thread and joins it (the job it is running finishes first).
  void stop() noexcept {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (low_thread_.joinable()) low_thread_.join();
  }

  /// The lock every queue operation, publish() and the consumer's own state share.
  [[nodiscard]] std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(m_); }
  [[nodiscard]] std::mutex& mutex() noexcept { return m_; }

  /// With the lock held: queues `job` and wakes the thread.
  void push(Job job) {
    high_.push(std::move(job));
    cv_.notify_all();
  }
  /// With the lock held: queues `job` behind every ordinary job, now or later queued.
  void push_low(Job job) {
    low_.push(std::move(job));
    cv_.notify_all();
  }

  /// With the lock held (in `lk`): blocks until `ready()`; publish() wakes every waiter.
  template <class Pred>
  void wait(std::unique_lock<std::mutex>& lk, Pred ready) {
    cv_.wait(lk, ready);
  }
  /// With the lock held: blocks until the next publish() (or any notify_all()).
  void wait(std::unique_lock<std::mutex>& lk) { cv_.wait(lk); }
  /// Wakes every waiter (after the consumer changed shared state itself).
  void notify_all() noexcept { cv_.notify_all(); }

  /// With the lock held: nothing queued and no job running.
  [[nodiscard]] bool idle() const noexcept { return high_.count == 0 && low_.count == 0 && !busy_ && !low_busy_; }

 private:
  /// `low`: the low worker's loop (low-priority jobs only); else ordinary jobs first, and
  /// low-priority ones too when there is no low worker.
  void loop(bool low) {
    const bool takes_low = low || !low_work_;
    const bool takes_high = !low;
    bool& busy = low ? low_busy_ : busy_;
    const Work& work = low ? low_work_ : work_;
    std::unique_lock<std::mutex> lk(m_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || (takes_high && high_.count != 0) || (takes_low && low_.count != 0); });
      if (stop_) return;
      Job job = takes_high && high_.count != 0 ? high_.pop() : low_.pop();
      busy = true;
      lk.unlock();
      std::exception_ptr error;
      try {
        work(job);
      } catch (...) {
        error = std::current_exception();
      }
      lk.lock();
      publish_(job, error);
      busy = false;
      cv_.notify_all();
    }
  }

  struct Queue {
    std::vector<Job> ring;
    std::size_t head = 0, count = 0;
    void push(Job job) {
      if (count == ring.size()) grow();
      ring[(head + count) % ring.size()] = std::move(job);
      ++count;
    }
    Job pop() {
      Job job = std::move(ring[head]);
      head = (head + 1) % ring.size();
      --count;
      return job;
    }
    /// A full ring doubles, keeping the queue order.
    void grow() {
      std::vector<Job> bigger(std::max<std::size_t>(1, ring.size() * 2));
      for (std::size_t i = 0; i < count; ++i) bigger[i] = std::move(ring[(head + i) % ring.size()]);
      ring = std::move(bigger);
      head = 0;
    }
  };

  std::mutex m_;
  std::condition_variable cv_;
  Queue high_, low_;
  bool busy_ = false;
  bool low_busy_ = false;
  bool stop_ = false;
  Work work_;
  Work low_work_;
  Publish publish_;
  std::thread thread_;
  std::thread low_thread_;
};

}  // namespace k3::util
