// A fixed pool of reader threads that splits a batch: each request is handed to whichever
// thread is free next (the calling thread reads too), so one slow request does not hold up
// the others. Several host threads may run batches at once; the pool serves them in turn.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace k3::storage::local {

class ReaderPool {
 public:
  /// `readers` counts the calling thread: readers - 1 threads are started.
  explicit ReaderPool(unsigned readers) {
    for (unsigned i = 1; i < readers; ++i) workers_.emplace_back([this] { work(); });
  }
  ~ReaderPool() {
    {
      const std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }
  ReaderPool(const ReaderPool&) = delete;
  ReaderPool& operator=(const ReaderPool&) = delete;

  /// Calls item(i) for every i in [0, count), spread over the pool; returns when all are
  /// done. `item` must not throw.
  void run(std::size_t count, const std::function<void(std::size_t)>& item) {
    if (count == 0) return;
    if (workers_.empty() || count == 1) {
      for (std::size_t i = 0; i < count; ++i) item(i);
      return;
    }
    Job job{item, count};
    {
      const std::lock_guard lock(mutex_);
      queue_.push_back(&job);
    }
    wake_.notify_all();
    drain(job);
    std::unique_lock lock(mutex_);
    std::erase(queue_, &job);
    job_done_.wait(lock, [&] { return job.finished == job.count && job.helpers == 0; });
  }

 private:
  struct Job {
    const std::function<void(std::size_t)>& item;
    std::size_t count;
    std::atomic<std::size_t> next{0};
    std::size_t finished = 0;  ///< guarded by mutex_
    unsigned helpers = 0;      ///< pool threads inside drain(); guarded by mutex_
  };

  void drain(Job& job) {
    std::size_t mine = 0;
    for (std::size_t i; (i = job.next.fetch_add(1)) < job.count; ++mine) job.item(i);
    const std::lock_guard lock(mutex_);
    job.finished += mine;
  }

  void work() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      Job* job = queue_.front();
      if (job->next.load() >= job->count) {  // nothing left to take: retire it from the queue
        queue_.pop_front();
        continue;
      }
      ++job->helpers;
      lock.unlock();
      drain(*job);
      lock.lock();
      --job->helpers;
      job_done_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable job_done_;
  std::deque<Job*> queue_;
  std::vector<std::thread> workers_;
  bool stopping_ = false;
};

}  // namespace k3::storage::local
