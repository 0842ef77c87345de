// The reader-thread helper the trunk ring, the row chunks and the expert cache share: jobs
// run in queue order off the caller's thread, outcomes are published under the shared lock,
// an exception reaches the consumer through publish() (the thread lives on), and a queue
// fuller than its capacity still keeps its order.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "util/reader_thread.hpp"

namespace {

struct Outcome {
  int job = -1;
  std::thread::id thread;
  std::string error;
};

}  // namespace

TEST_CASE("the reader thread runs jobs in order and hands their exceptions over", "[streaming][reader]") {
  std::vector<Outcome> done;  // under the reader's lock
  std::vector<std::thread::id> ran_on(8);
  k3::util::ReaderThread<int> reader;
  reader.start(
      2,  // fewer than the jobs queued at once below: the ring grows, keeping the order
      [&](int& job) {
    ran_on[static_cast<std::size_t>(job)] = std::this_thread::get_id();
    if (job % 3 == 2) throw std::runtime_error("job " + std::to_string(job) + " failed");
      },
      [&](int& job, std::exception_ptr error) {
    Outcome o{job, ran_on[static_cast<std::size_t>(job)], ""};
    if (error) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        o.error = e.what();
      }
    }
    done.push_back(o);
  });
  {
    auto lk = reader.lock();
    for (int j = 0; j < 8; ++j) reader.push(j);
    reader.wait(lk, [&] { return done.size() == 8 && reader.idle(); });
  }
  for (int j = 0; j < 8; ++j) {
    const Outcome& o = done[static_cast<std::size_t>(j)];
    CHECK(o.job == j);
    CHECK(o.thread != std::this_thread::get_id());
    CHECK(o.error == (j % 3 == 2 ? "job " + std::to_string(j) + " failed" : ""));
  }
}

TEST_CASE("low-priority jobs run after ordinary ones, or beside them on a low worker", "[streaming][reader]") {
  SECTION("one thread: an ordinary job queued later still runs before the queued low ones") {
    std::vector<int> order;  // under the reader's lock
    k3::util::ReaderThread<int> reader;
    reader.start(
        4, [](int&) {}, [&](int& job, std::exception_ptr) { order.push_back(job); });
    auto lk = reader.lock();
    // Queued together under the lock: the thread sees them all at once.
    reader.push_low(10);
    reader.push_low(11);
    reader.push(1);
    reader.push(2);
    reader.wait(lk, [&] { return order.size() == 4 && reader.idle(); });
    CHECK(order == std::vector<int>{1, 2, 10, 11});
  }
  SECTION("a low worker: an ordinary job finishes while a low job is still being run") {
    std::vector<int> order;  // under the reader's lock
    bool release_low = false;
    std::thread::id low_thread, high_thread;
    k3::util::ReaderThread<int> reader;
    reader.start(
        4, [&](int&) { high_thread = std::this_thread::get_id(); },
        [&](int& job, std::exception_ptr) { order.push_back(job); },
        [&](int&) {
      low_thread = std::this_thread::get_id();
      auto lk = reader.lock();
      reader.wait(lk, [&] { return release_low; });  // held until the ordinary job is done
        });
    auto lk = reader.lock();
    reader.push_low(10);
    reader.push(1);
    reader.wait(lk, [&] { return !order.empty(); });
    CHECK(order == std::vector<int>{1});  // the low job is still running
    release_low = true;
    reader.notify_all();
    reader.wait(lk, [&] { return order.size() == 2 && reader.idle(); });
    CHECK(order == std::vector<int>{1, 10});
    CHECK(low_thread != high_thread);
  }
}
