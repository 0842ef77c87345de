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
  k3::runtime::ReaderThread<int> reader;
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
