// One HTTP range request of the http backend (or the 1-byte probe of open()), its libcurl
// callbacks, and what a finished attempt means (done, or worth another attempt).
//
// A transfer is retried in place (attempts, backoff) by the Transport; each attempt starts
// at the file's URL and follows at most kMaxRedirects redirects itself (origin.hpp says why).
// Every answer is checked against the version seen at open (validators.hpp): a changed file
// is refused, never mixed. Nothing here takes a lock: the worker thread alone touches a
// transfer between run() handing it in and finish().
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <curl/curl.h>

#include <k3/status.hpp>

#include "curl_handles.hpp"
#include "http_response.hpp"
#include "range_plan.hpp"
#include "validators.hpp"

namespace k3::storage::http {

using Clock = std::chrono::steady_clock;

inline constexpr int kMaxRedirects = 5;

/// The parameters, as the factory read them; their defaults are those of kParams.
struct Settings {
  long connections = 0;         ///< connections to one host (and in all)
  long connect_timeout_ms = 0;  ///< TCP + TLS handshake
  long low_speed_bytes = 0;     ///< a transfer slower than this (bytes/s) ...
  long low_speed_time_s = 0;    ///< ... for this long is a stall
  long request_timeout_s = 0;   ///< whole attempt; 0 = none (stalls are caught above)
  long read_timeout_s = 0;      ///< a range from its first request to its last byte, retries included
  int retries = 0;              ///< attempts after the first, for transient failures
  long backoff_ms = 0;          ///< first retry delay; doubles per attempt
  long backoff_max_ms = 0;
  std::uint64_t max_range_bytes = 0;
  std::uint64_t coalesce_gap_bytes = 0;
  long http_version = CURL_HTTP_VERSION_2TLS;
  bool tls_verify = true;
  bool allow_unvalidated = false;
  std::string ca_bundle;
  std::vector<std::string> secret_headers;  ///< header lines from the environment (never logged)
};

/// A file as open() found it: its URL and version; every answer is checked against it.
struct Identity {
  std::string url;
  Version version;
};

/// The transfers of one read() (or one open()): the host thread waits until all are done.
struct Batch {
  std::mutex mutex;
  std::condition_variable done;
  std::size_t remaining = 0;  ///< guarded by mutex
  /// Worker thread only: the first final failure of a range of this batch. The read fails
  /// with it, so its other ranges are not worth waiting for: they end with it too.
  std::optional<k3::sdk::Status> failed;
};

struct Transfer {
  bool probe = false;
  Identity* identity = nullptr;  ///< probe: its version is filled in; read: checked
  Range range;
  Batch* batch = nullptr;

  // Per attempt (reset_attempt()); a redirect hop is part of its attempt.
  ResponseHeaders headers;
  std::uint64_t received = 0;
  std::size_t cursor = 0;
  bool body_started = false;
  std::optional<k3::sdk::Status> refused;  ///< set by a callback: a final failure, no retry
  char errbuf[CURL_ERROR_SIZE] = {};
  HeaderList request_headers;  ///< kept alive while libcurl sends them
  std::string url;             ///< this hop's URL: the file's, or where a redirect pointed
  bool same_origin = true;     ///< url has the file URL's origin (the secret header may go)
  int hops = 0;                ///< redirects followed in this attempt

  // Across attempts.
  int attempt = 0;
  Clock::time_point handed_in{};  ///< when run() got it
  Clock::time_point started{};    ///< first reached the server (or failed to): read_timeout_s counts from here
  Clock::time_point not_before{};
  std::string last_failure;  ///< why the last attempt failed (without where())
  EasyHandle easy;
  k3::sdk::Status result;

  /// "<url>: bytes A-B" for messages (a presigned URL's query string cut).
  [[nodiscard]] std::string where() const;
  void reset_attempt();
  /// Called at the first body byte: is this the answer asked for, of the version seen at
  /// open? Sets `refused` and returns false when not.
  bool accept_headers();
};

/// libcurl callbacks; `user` is the Transfer.
std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) noexcept;
std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) noexcept;
/// CURLOPT_PREREQFUNCTION: the attempt has a connection and sends its request now.
int on_prereq(void* user, char*, char*, int, int) noexcept;

/// What a finished attempt means: done (ok or final failure), or worth another attempt.
struct Verdict {
  bool retry = false;
  k3::sdk::Status status;
};
/// Judges an attempt that ended with `rc` and was not a redirect (3xx) to follow.
Verdict judge(Transfer& t, CURLcode rc);

}  // namespace k3::storage::http
