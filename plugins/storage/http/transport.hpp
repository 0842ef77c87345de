// The http backend's engine: one libcurl multi handle driven by one worker thread, with a
// pool of at most `connections` keep-alive connections (HTTP/2 streams multiplexed on them
// where the server offers h2). Host threads hand in the transfers of a read (run()) and wait.
//
// The worker retries a transient failure (5xx, 408, 429, connection failures, resets,
// stalls, truncated bodies) with exponential backoff and jitter, logging a warning line
// (at most one a second) that says what, which attempt and why; follows redirects itself,
// sending the secret header only to the file URL's origin (origin.hpp); and ends a range:
//   - timed_out when it has not arrived read_timeout_s after it first reached the server
//     (retries and backoff included): the host does not retry it;
//   - interrupted when the host asks the run to stop (HostServices::stop_requested) and the
//     range is still waited for kStopGrace after the request (or after it was handed in):
//     a healthy server finishes the token in that time, a stalled one is abandoned;
//   - with the failure of another range of the same read, which fails anyway.
#pragma once
#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <k3/host.hpp>

#include "transfer.hpp"

namespace k3::storage::http {

/// How long a range may still be waited for once the host asked to stop.
inline constexpr std::chrono::milliseconds kStopGrace{1000};

class Transport {
 public:
  Transport(Settings settings, k3::sdk::HostServices* host);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  /// Starts the worker; false (with `error`) when libcurl cannot make a multi handle.
  bool start(std::string& error);
  [[nodiscard]] const Settings& settings() const noexcept { return settings_; }
  [[nodiscard]] k3::sdk::HostServices* host() const noexcept { return host_; }

  /// Runs every transfer (addresses stable until return) and waits for all of them.
  void run(std::span<Transfer> transfers);

 private:
  /// Traffic counters, reported once when the backend goes away.
  struct Counters {
    std::atomic<std::uint64_t> attempts{0}, bytes{0}, connects{0}, retries{0}, ranges{0}, timeouts{0};
  };

  void finish(Transfer& t, k3::sdk::Status st);
  EasyHandle take_easy();
  /// Configures and adds one attempt (or, `hop`, the next redirect of the attempt); a
  /// failure to do so finishes the transfer.
  void launch(Transfer& t, bool hop);
  void guarded_launch(Transfer& t, bool hop) noexcept;
  /// Takes the transfer's handle out of the multi handle (counting what it did).
  void detach(Transfer& t);
  /// An attempt ended: follow its redirect, finish the transfer, or schedule another attempt.
  void settle(Transfer& t, CURLcode rc);
  /// Points the attempt at the redirect target `to_url`; false when it is refused (finishing
  /// the transfer).
  bool follow_redirect(Transfer& t, const std::string& to_url);
  /// Ends what waits too long: past read_timeout_s, kStopGrace after a stop request, or in a
  /// batch that failed already.
  void sweep(Clock::time_point now);
  /// Why `t` must end now, or nullopt.
  std::optional<k3::sdk::Status> overdue(const Transfer& t, Clock::time_point now) const;
  void warn_retry(const std::string& line);
  void work();

  Settings settings_;
  k3::sdk::HostServices* host_;
  MultiHandle multi_;
  std::thread worker_;
  std::mutex mutex_;
  std::deque<Transfer*> incoming_;  ///< guarded by mutex_
  bool stopping_ = false;           ///< guarded by mutex_
  // Worker thread only.
  std::vector<EasyHandle> idle_;
  std::vector<Transfer*> active_;               ///< in the multi handle
  std::vector<Transfer*> waiting_;              ///< backing off before the next attempt
  std::optional<Clock::time_point> stop_seen_;  ///< when stop_requested() was first seen true
  Clock::time_point last_warning_{};
  std::uint64_t unwarned_ = 0;  ///< retries logged at debug since the last warning line
  std::minstd_rand rng_{std::random_device{}()};
  Counters counters_;
};

}  // namespace k3::storage::http
