// The device model behind `throttle`, in virtual time (seconds on a monotonic clock), with
// no sleeping and no clock reads of its own so it can be tested exactly.
//
// A device has `max_inflight` request slots (0 = unlimited) and one transfer link of
// `bandwidth` bytes per second (0 = unlimited). A request of n bytes issued at time t:
//   begins      at b = max(t, the earliest time a slot is free),
//   transfers   from s = max(b + latency, the time the link is free) for n / bandwidth,
//   completes   at c = s + n / bandwidth; the link and the slot are free again at c.
// Latency overlaps across requests in flight; bandwidth is shared (a token bucket with no
// burst). The same issue times always give the same completion times.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

namespace k3::storage::throttle {

class LinkModel {
 public:
  LinkModel(double bytes_per_second, double latency_seconds, unsigned max_inflight)
      : bytes_per_second_(bytes_per_second), latency_(latency_seconds), max_inflight_(max_inflight) {}

  /// Completion time of a request of `bytes` issued at `now`; reserves the slot and link.
  double issue(double now, std::uint64_t bytes) {
    double begin = now;
    if (max_inflight_ > 0 && busy_until_.size() >= max_inflight_) {
      begin = std::max(begin, busy_until_.top());
      busy_until_.pop();
    }
    const double transfer = bytes_per_second_ > 0 ? static_cast<double>(bytes) / bytes_per_second_ : 0.0;
    const double start = std::max(begin + latency_, link_free_);
    const double done = start + transfer;
    if (bytes_per_second_ > 0) link_free_ = done;
    if (max_inflight_ > 0) busy_until_.push(done);
    return done;
  }

 private:
  double bytes_per_second_;
  double latency_;
  unsigned max_inflight_;
  double link_free_ = 0.0;
  std::priority_queue<double, std::vector<double>, std::greater<>> busy_until_;  ///< per busy slot
};

}  // namespace k3::storage::throttle
