// Storage `http`: reads files from an http:// or https:// URL with HTTP range requests.
//
// One Transport per backend: a libcurl multi handle driven by one worker thread, with a
// pool of at most `connections` keep-alive connections (HTTP/2 streams are multiplexed on
// them where the server offers h2). A host thread's read() turns its batch into ranges
// (range_plan.hpp: large reads split, adjacent ones merged), hands them all to the worker
// at once and waits; several host threads' batches are in flight together.
//
// open() sends "Range: bytes=0-0": the size comes from Content-Range, and the ETag and
// Last-Modified are recorded. Every later response must carry the same validators and
// total size, or the read is refused as "changed since open" (never mixed bytes). A
// server answering 200 to a range request is refused. Transient failures (5xx, 408, 429,
// connection failures, resets, stalls, truncated bodies) are retried with exponential
// backoff and jitter; the rest fail at once. The token or header named by a parameter is
// read from the environment at creation and never appears in a message.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <curl/curl.h>

#include <k3/plugin.hpp>
#include <k3/storage_extras.hpp>

#include "curl_handles.hpp"
#include "http_response.hpp"
#include "range_plan.hpp"

namespace {

namespace http = k3::storage::http;
using k3::sdk::Status;
using k3::sdk::StatusCode;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kComponent = "storage/http";

/// Everything a transfer needs from the parameters; fixed at creation.
/// The parameters, as the factory read them; their defaults are those of kParams.
struct Settings {
  long connections = 0;             ///< connections to one host (and in all)
  long connect_timeout_ms = 0;      ///< TCP + TLS handshake
  long low_speed_bytes = 0;         ///< a transfer slower than this (bytes/s) ...
  long low_speed_time_s = 0;        ///< ... for this long is a stall
  long request_timeout_s = 0;       ///< whole transfer; 0 = none (stalls are caught above)
  int retries = 0;                  ///< attempts after the first, for transient failures
  long backoff_ms = 0;              ///< first retry delay; doubles per attempt
  long backoff_max_ms = 0;
  std::uint64_t max_range_bytes = 0;
  std::uint64_t coalesce_gap_bytes = 0;
  long http_version = CURL_HTTP_VERSION_2TLS;
  bool tls_verify = true;
  std::string ca_bundle;
  http::HeaderList headers;  ///< the secret header, if any (never logged)
};

/// What open() learnt about a file; every response is checked against it.
struct Identity {
  std::string url;
  std::uint64_t size = 0;
  std::optional<std::string> etag, last_modified;
};

/// Traffic counters, reported once when the backend goes away.
struct Counters {
  std::atomic<std::uint64_t> attempts{0}, bytes{0}, connects{0}, retries{0}, ranges{0};
};

struct Batch {
  std::mutex mutex;
  std::condition_variable done;
  std::size_t remaining = 0;
};

/// One HTTP request for one range (or the probe of open()), retried in place.
struct Transfer {
  bool probe = false;
  Identity* identity = nullptr;  ///< probe: filled in; read: checked
  http::Range range;
  Batch* batch = nullptr;

  // Per attempt.
  http::ResponseHeaders headers;
  std::uint64_t received = 0;
  std::size_t cursor = 0;
  bool body_started = false;
  std::optional<Status> refused;  ///< set by a callback: a final failure, no retry
  char errbuf[CURL_ERROR_SIZE] = {};

  int attempt = 0;
  Clock::time_point not_before{};
  http::EasyHandle easy;
  Status result;

  [[nodiscard]] std::string where() const {
    return http::shown_url(identity->url) + ": bytes " + std::to_string(range.first) + "-" +
           std::to_string(range.end - 1);
  }
  void reset_attempt() {
    headers = {};
    received = 0;
    cursor = 0;
    body_started = false;
    refused.reset();
    errbuf[0] = '\0';
  }

  /// Called at the first body byte: is this the response we asked for?
  bool accept_headers() {
    if (headers.status == 200) {
      refused = Status::error(StatusCode::io_error,
                              where() + ": the server ignored the Range header (200 with the whole body); "
                                        "the http backend needs a server that answers range requests with 206");
      return false;
    }
    if (headers.status != 206) return true;  // an error page: dropped, classified at the end
    const auto cr = headers.content_range ? http::parse_content_range(*headers.content_range) : std::nullopt;
    if (!cr || cr->unsatisfied || cr->first != range.first || cr->last != range.end - 1) {
      refused = Status::error(StatusCode::io_error,
                              where() + ": wrong Content-Range '" + headers.content_range.value_or("(none)") +
                                  "' in a 206 answer");
      return false;
    }
    if (probe) return true;
    std::string changed;
    if (cr->total && *cr->total != identity->size)
      changed = "size " + std::to_string(identity->size) + ", now " + std::to_string(*cr->total);
    else if (identity->etag && headers.etag && *headers.etag != *identity->etag)
      changed = "ETag " + *identity->etag + ", now " + *headers.etag;
    else if (identity->etag && !headers.etag)
      changed = "ETag " + *identity->etag + ", now none";
    else if (!identity->etag && identity->last_modified && headers.last_modified &&
             *headers.last_modified != *identity->last_modified)
      changed = "Last-Modified " + *identity->last_modified + ", now " + *headers.last_modified;
    if (!changed.empty()) {
      refused = Status::error(StatusCode::io_error,
                              where() + ": the object changed since it was opened (" + changed +
                                  "); refusing to mix two versions");
      return false;
    }
    return true;
  }
};

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) noexcept {
  auto& t = *static_cast<Transfer*>(user);
  try {
    t.headers.feed(std::string_view(data, size * count));
  } catch (...) {
    return 0;  // out of memory: abort the transfer
  }
  return size * count;
}

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) noexcept {
  auto& t = *static_cast<Transfer*>(user);
  const std::size_t n = size * count;
  try {
    if (!t.body_started) {
      t.body_started = true;
      if (!t.accept_headers()) return 0;
    }
  } catch (...) {
    t.refused = Status::error(StatusCode::out_of_memory, "http: out of memory");
    return 0;
  }
  if (t.headers.status != 206) return n;  // an error body: read and dropped
  if (t.received + n > t.range.length()) {
    t.refused = Status::error(StatusCode::io_error, t.where() + ": the server sent more bytes than the range holds");
    return 0;
  }
  if (!t.probe) http::scatter(t.range, t.cursor, t.range.first + t.received, reinterpret_cast<const std::byte*>(data), n);
  t.received += n;
  return n;
}

/// What a finished attempt means: done (ok or final failure), or worth another attempt.
struct Verdict {
  bool retry = false;
  Status status;
};

bool transient_curl_error(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_WEIRD_SERVER_REPLY: return true;
    default: return false;
  }
}

std::string curl_failure_class(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST: return "cannot connect";
    case CURLE_OPERATION_TIMEDOUT: return "timed out (stalled or too slow)";
    case CURLE_PARTIAL_FILE: return "truncated body (the connection closed early)";
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING: return "connection reset";
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE: return "TLS verification failed";
    case CURLE_SSL_CONNECT_ERROR: return "TLS handshake failed";
    case CURLE_TOO_MANY_REDIRECTS: return "too many redirects";
    default: return "transfer failed";
  }
}

Verdict judge(Transfer& t, CURLcode rc) {
  if (t.refused) return {false, std::move(*t.refused)};
  if (rc != CURLE_OK) {
    std::string why = curl_failure_class(rc) + " (" + (t.errbuf[0] != '\0' ? t.errbuf : curl_easy_strerror(rc)) + ")";
    return {transient_curl_error(rc), Status::error(StatusCode::io_error, t.where() + ": " + why)};
  }
  const long s = t.headers.status;
  if (t.probe && (s == 416 || s == 200)) {
    // An empty object: 416 with "bytes */0", or (nginx) 200 with an empty body, which is the
    // whole object (a non-empty body would have been refused in on_body).
    const auto cr = t.headers.content_range ? http::parse_content_range(*t.headers.content_range) : std::nullopt;
    if (s == 200 || (cr && cr->unsatisfied && cr->total)) {
      t.identity->size = s == 200 ? 0 : *cr->total;
      t.identity->etag = t.headers.etag;
      t.identity->last_modified = t.headers.last_modified;
      return {};
    }
  }
  if (s == 206) {
    if (t.received != t.range.length())
      return {true, Status::error(StatusCode::io_error, t.where() + ": truncated body: got " + std::to_string(t.received) +
                                                            " of " + std::to_string(t.range.length()) + " bytes")};
    if (t.probe) {
      const auto cr = http::parse_content_range(*t.headers.content_range);  // checked in accept_headers
      if (!cr || !cr->total)
        return {false, Status::error(StatusCode::io_error,
                                     t.where() + ": Content-Range '" + *t.headers.content_range +
                                         "' gives no size; the http backend needs the object's size")};
      t.identity->size = *cr->total;
      t.identity->etag = t.headers.etag;
      t.identity->last_modified = t.headers.last_modified;
    }
    return {};
  }
  const std::string code = "HTTP " + std::to_string(s);
  if (s >= 500 || s == 408 || s == 429) return {true, Status::error(StatusCode::io_error, t.where() + ": " + code)};
  if (s == 404 || s == 410) return {false, Status::error(StatusCode::not_found, t.where() + ": " + code + " (no such file)")};
  if (s == 401 || s == 403)
    return {false, Status::error(StatusCode::io_error,
                                 t.where() + ": " + code + " (access denied: check the token or the presigned URL)")};
  if (s == 416)
    return {false, Status::error(StatusCode::io_error, t.where() + ": " + code +
                                                           " (range not satisfiable: the object is shorter than at open)")};
  if (s == 200)  // an empty body, so on_body never saw it
    return {false, Status::error(StatusCode::io_error, t.where() + ": the server ignored the Range header (200)")};
  return {false, Status::error(StatusCode::io_error, t.where() + ": unexpected " + code)};
}

/// The multi handle, its worker thread and the queue host threads hand transfers in by.
class Transport {
 public:
  Transport(Settings settings, k3::sdk::HostServices* host) : settings_(std::move(settings)), host_(host) {}

  /// Starts the worker; false (with `error`) when libcurl cannot make a multi handle.
  bool start(std::string& error) {
    multi_.reset(curl_multi_init());
    if (!multi_) {
      error = "http: curl_multi_init failed";
      return false;
    }
    curl_multi_setopt(multi_.get(), CURLMOPT_MAX_HOST_CONNECTIONS, settings_.connections);
    curl_multi_setopt(multi_.get(), CURLMOPT_MAX_TOTAL_CONNECTIONS, settings_.connections);
    curl_multi_setopt(multi_.get(), CURLMOPT_MAXCONNECTS, settings_.connections);
    curl_multi_setopt(multi_.get(), CURLMOPT_PIPELINING, static_cast<long>(CURLPIPE_MULTIPLEX));
    worker_ = std::thread([this] { work(); });
    return true;
  }

  ~Transport() {
    if (worker_.joinable()) {
      {
        const std::lock_guard lock(mutex_);
        stopping_ = true;
      }
      curl_multi_wakeup(multi_.get());
      worker_.join();
    }
    for (auto& e : idle_) curl_multi_remove_handle(multi_.get(), e.get());
    idle_.clear();  // easy handles go before the multi handle
    if (host_ != nullptr && counters_.attempts.load() > 0)
      host_->log(k3::sdk::LogLevel::info, kComponent,
                 std::to_string(counters_.ranges.load()) + " ranges in " + std::to_string(counters_.attempts.load()) +
                     " requests (" + std::to_string(counters_.retries.load()) + " retries), " +
                     std::to_string(counters_.bytes.load()) + " bytes, " + std::to_string(counters_.connects.load()) +
                     " connections opened");
  }
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  const Settings& settings() const noexcept { return settings_; }

  /// Runs every transfer (addresses stable until return) and waits for all of them.
  void run(std::span<Transfer> transfers) {
    if (transfers.empty()) return;
    Batch batch;
    batch.remaining = transfers.size();
    {
      const std::lock_guard lock(mutex_);
      for (auto& t : transfers) {
        t.batch = &batch;
        incoming_.push_back(&t);
      }
    }
    counters_.ranges += transfers.size();
    curl_multi_wakeup(multi_.get());
    std::unique_lock lock(batch.mutex);
    batch.done.wait(lock, [&] { return batch.remaining == 0; });
  }

 private:
  void finish(Transfer& t, Status st) {
    t.result = std::move(st);
    Batch& b = *t.batch;
    const std::lock_guard lock(b.mutex);
    if (--b.remaining == 0) b.done.notify_all();
  }

  http::EasyHandle take_easy() {
    if (!idle_.empty()) {
      http::EasyHandle e = std::move(idle_.back());
      idle_.pop_back();
      curl_easy_reset(e.get());
      return e;
    }
    return http::EasyHandle(curl_easy_init());
  }

  /// Configures and adds one attempt; a failure to do so finishes the transfer.
  void launch(Transfer& t) {
    t.reset_attempt();
    ++t.attempt;
    t.easy = take_easy();
    CURL* e = t.easy.get();
    if (e == nullptr) return finish(t, Status::error(StatusCode::out_of_memory, t.where() + ": curl_easy_init failed"));
    const std::string range = std::to_string(t.range.first) + "-" + std::to_string(t.range.end - 1);
    const Settings& s = settings_;
    curl_easy_setopt(e, CURLOPT_URL, t.identity->url.c_str());
    curl_easy_setopt(e, CURLOPT_RANGE, range.c_str());  // libcurl copies strings
    curl_easy_setopt(e, CURLOPT_PRIVATE, &t);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t.errbuf);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, s.connect_timeout_ms);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, s.low_speed_bytes);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, s.low_speed_time_s);
    curl_easy_setopt(e, CURLOPT_TIMEOUT, s.request_timeout_s);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, s.http_version);
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 256L * 1024L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "k3host-storage-http/1.0");
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, s.tls_verify ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, s.tls_verify ? 2L : 0L);
    if (!s.ca_bundle.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, s.ca_bundle.c_str());
    if (s.headers) curl_easy_setopt(e, CURLOPT_HTTPHEADER, s.headers.get());
    ++counters_.attempts;
    if (curl_multi_add_handle(multi_.get(), e) != CURLM_OK) {
      idle_.push_back(std::move(t.easy));
      finish(t, Status::error(StatusCode::internal, t.where() + ": curl_multi_add_handle failed"));
    }
  }

  /// An attempt ended: finish the transfer or schedule another attempt.
  void settle(Transfer& t, CURLcode rc, std::vector<Transfer*>& waiting) {
    long connects = 0;
    if (curl_easy_getinfo(t.easy.get(), CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK && connects > 0)
      counters_.connects += static_cast<std::uint64_t>(connects);
    counters_.bytes += t.received;
    curl_multi_remove_handle(multi_.get(), t.easy.get());
    if (idle_.size() < static_cast<std::size_t>(settings_.connections) * 4) idle_.push_back(std::move(t.easy));
    t.easy.reset();
    Verdict v;
    try {
      v = judge(t, rc);
    } catch (...) {
      return finish(t, Status::error(StatusCode::out_of_memory, "http: out of memory"));
    }
    if (!v.retry || t.attempt > settings_.retries) {
      if (!v.status.ok() && t.attempt > 1)
        v.status.detail += " (after " + std::to_string(t.attempt) + " attempts)";
      return finish(t, std::move(v.status));
    }
    ++counters_.retries;
    // Exponential backoff, full jitter over its upper half: [d/2, d].
    const double base = std::min(static_cast<double>(settings_.backoff_max_ms),
                                 static_cast<double>(settings_.backoff_ms) * static_cast<double>(1L << std::min(t.attempt - 1, 20)));
    std::uniform_real_distribution<double> jitter(0.5, 1.0);
    const auto delay = std::chrono::duration<double, std::milli>(base * jitter(rng_));
    t.not_before = Clock::now() + std::chrono::duration_cast<Clock::duration>(delay);
    if (host_ != nullptr)
      host_->log(k3::sdk::LogLevel::debug, kComponent, "retrying: " + v.status.detail);
    waiting.push_back(&t);
  }

  /// launch(), finishing the transfer instead of letting an exception leave the worker.
  void guarded_launch(Transfer& t) noexcept {
    try {
      launch(t);
    } catch (...) {
      if (t.easy) {
        curl_multi_remove_handle(multi_.get(), t.easy.get());
        t.easy.reset();
      }
      finish(t, Status{StatusCode::out_of_memory, {}});
    }
  }

  void work() {
    std::vector<Transfer*> fresh, waiting;
    for (;;) {
      {
        const std::lock_guard lock(mutex_);
        if (stopping_) return;
        fresh.assign(incoming_.begin(), incoming_.end());
        incoming_.clear();
      }
      for (Transfer* t : fresh) guarded_launch(*t);
      const auto now = Clock::now();
      auto next_retry = Clock::time_point::max();
      std::erase_if(waiting, [&](Transfer* t) {
        if (t->not_before <= now) {
          guarded_launch(*t);
          return true;
        }
        next_retry = std::min(next_retry, t->not_before);
        return false;
      });
      int running = 0;
      curl_multi_perform(multi_.get(), &running);
      int left = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi_.get(), &left)) {
        if (msg->msg != CURLMSG_DONE) continue;
        Transfer* t = nullptr;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
        const CURLcode rc = msg->data.result;
        try {
          settle(*t, rc, waiting);
        } catch (...) {  // out of memory while formatting: the transfer still finishes
          if (t->easy) {
            curl_multi_remove_handle(multi_.get(), t->easy.get());
            t->easy.reset();
          }
          finish(*t, Status{StatusCode::out_of_memory, {}});
        }
      }
      for (Transfer* t : waiting) next_retry = std::min(next_retry, t->not_before);
      int timeout_ms = 1000;
      if (next_retry != Clock::time_point::max()) {
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next_retry - Clock::now()).count();
        timeout_ms = static_cast<int>(std::clamp<long long>(ms, 0, 1000));
      }
      if (running > 0 || timeout_ms > 0) curl_multi_poll(multi_.get(), nullptr, 0, timeout_ms, nullptr);
    }
  }

  Settings settings_;
  k3::sdk::HostServices* host_;
  http::MultiHandle multi_;
  std::thread worker_;
  std::mutex mutex_;
  std::deque<Transfer*> incoming_;  ///< guarded by mutex_
  bool stopping_ = false;           ///< guarded by mutex_
  // Worker thread only.
  std::vector<http::EasyHandle> idle_;
  std::minstd_rand rng_{std::random_device{}()};
  Counters counters_;
};

class HttpFile final : public k3::sdk::StorageFile, public k3::sdk::StorageFileVersion {
 public:
  HttpFile(std::shared_ptr<Transport> transport, Identity identity)
      : transport_(std::move(transport)),
        identity_(std::move(identity)),
        version_(identity_.etag            ? "ETag " + *identity_.etag
                 : identity_.last_modified ? "Last-Modified " + *identity_.last_modified
                                           : std::string()) {}

  [[nodiscard]] std::uint64_t size() const noexcept override { return identity_.size; }
  /// The validator recorded at open (sdk::StorageFileVersion): what a decorator that keeps
  /// bytes (tiered) keys them by.
  [[nodiscard]] std::string_view version() const noexcept override { return version_; }
  [[nodiscard]] std::uint32_t alignment() const noexcept override { return 1; }

  Status read(std::span<k3::sdk::ReadRequest> batch) noexcept override {
    try {
      return read_batch(batch);
    } catch (const std::exception& e) {  // std::bad_alloc, std::system_error from a lock
      for (auto& r : batch) r.result = StatusCode::out_of_memory;
      return Status::error(StatusCode::out_of_memory, http::shown_url(identity_.url) + ": " + e.what());
    }
  }

 private:
  Status read_batch(std::span<k3::sdk::ReadRequest> batch) {
    const Settings& s = transport_->settings();
    std::vector<Status> results(batch.size());
    std::vector<http::Piece> pieces;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      auto& r = batch[i];
      if (r.length == 0) continue;
      if (r.dest == nullptr) {
        results[i] = Status::error(StatusCode::invalid_argument, http::shown_url(identity_.url) + ": read at offset " +
                                                                     std::to_string(r.offset) + " has no destination buffer");
        continue;
      }
      const std::uint64_t avail = r.offset >= identity_.size ? 0 : std::min(r.length, identity_.size - r.offset);
      if (avail < r.length)
        results[i] = Status::error(StatusCode::short_read, http::shown_url(identity_.url) + ": short read at offset " +
                                                               std::to_string(r.offset) + ": got " + std::to_string(avail) +
                                                               " of " + std::to_string(r.length) + " bytes");
      if (avail > 0) http::cut_pieces(i, r.offset, avail, r.dest, s.max_range_bytes, pieces);
    }
    std::vector<http::Range> ranges = http::plan_ranges(std::move(pieces), s.coalesce_gap_bytes, s.max_range_bytes);
    std::vector<Transfer> transfers(ranges.size());
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      transfers[i].identity = &identity_;
      transfers[i].range = std::move(ranges[i]);
    }
    transport_->run(transfers);
    for (auto& t : transfers)
      if (!t.result.ok())
        for (const auto& p : t.range.pieces)
          if (results[p.request].ok()) results[p.request] = t.result;
    Status first;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      batch[i].result = results[i].code;
      if (!results[i].ok() && first.ok()) first = std::move(results[i]);
    }
    return first;
  }

  std::shared_ptr<Transport> transport_;
  Identity identity_;  ///< read by the worker during run(); never written after open
  std::string version_;  ///< "ETag <etag>", "Last-Modified <date>" or empty
};

class HttpBackend final : public k3::sdk::StorageBackend {
 public:
  explicit HttpBackend(std::shared_ptr<Transport> transport) : transport_(std::move(transport)) {}

  Status list(std::string_view uri, std::vector<std::string>& names) noexcept override {
    names.clear();
    try {
      return Status::error(StatusCode::unsupported, http::shown_url(uri) +
                                                        ": HTTP has no folder listing; the checkpoint needs "
                                                        "model.safetensors.index.json");
    } catch (...) {
      return Status::error(StatusCode::out_of_memory, "http: out of memory");
    }
  }

  Status open(std::string_view uri, std::unique_ptr<k3::sdk::StorageFile>& out) noexcept override {
    try {
      if (!uri.starts_with("http://") && !uri.starts_with("https://"))
        return Status::error(StatusCode::invalid_argument,
                             std::string(uri) + ": not an http:// or https:// URL (the http storage plugin reads URLs only)");
      Identity identity;
      identity.url = std::string(uri);
      std::byte probe_byte{};
      Transfer probe;
      probe.probe = true;
      probe.identity = &identity;
      probe.range.first = 0;
      probe.range.end = 1;
      probe.range.pieces.push_back({0, 0, 1, &probe_byte});
      transport_->run({&probe, 1});
      if (!probe.result.ok()) {
        if (probe.result.code == StatusCode::not_found)
          probe.result.detail = http::shown_url(uri) + ": no such file (HTTP 404)";
        return probe.result;
      }
      out = std::make_unique<HttpFile>(transport_, std::move(identity));
      return Status::success();
    } catch (const std::exception& e) {
      return Status::error(StatusCode::out_of_memory, http::shown_url(uri) + ": " + e.what());
    }
  }

 private:
  std::shared_ptr<Transport> transport_;
};

std::once_flag curl_initialised;  // trivially destructible; libcurl is never cleaned up

/// Reads the environment variable `name` into a header line; never shows its value. The
/// detail of an invalid_argument is about the parameter (the caller quotes its description).
Status secret_header(const std::string& name, bool bearer, http::HeaderList& headers) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr || *value == '\0')
    return Status::error(StatusCode::invalid_argument, "the environment variable " + name + " is not set or empty");
  const std::string_view v(value);
  if (v.find_first_of("\r\n") != std::string_view::npos)
    return Status::error(StatusCode::invalid_argument, "the environment variable " + name + " holds a line break");
  if (!bearer && (v.find(':') == std::string_view::npos || v.front() == ':'))
    return Status::error(StatusCode::invalid_argument,
                         "the environment variable " + name + " must hold one header line 'Name: value'");
  const std::string line = bearer ? "Authorization: Bearer " + std::string(v) : std::string(v);
  if (!http::append_header(headers, line.c_str()))
    return Status::error(StatusCode::out_of_memory, "curl_slist_append failed");
  return Status::success();
}

}  // namespace

namespace k3::storage::http {

constexpr K3ParamDescriptor kParams[] = {
    sdk::param::integer("connections", "8", "[1, 256]", "connections to the server (the pool; requests beyond it queue)"),
    sdk::param::integer("connect_timeout_ms", "10000", "[1, 600000]", "TCP + TLS handshake timeout in ms"),
    sdk::param::integer("low_speed_bytes", "1024", "[0, 1073741824]",
                        "a transfer slower than this many bytes/s for low_speed_time_s is a stall (timed out, "
                        "retried); 0 = no stall detection"),
    sdk::param::integer("low_speed_time_s", "30", "[1, 3600]", "seconds below low_speed_bytes that make a stall"),
    sdk::param::integer("request_timeout_s", "0", "[0, 86400]", "limit on one whole transfer in seconds; 0 = none"),
    sdk::param::integer("retries", "4", "[0, 100]", "attempts after the first for a transient failure"),
    sdk::param::integer("backoff_ms", "100", "[0, 600000]",
                        "delay before the first retry in ms; doubles each attempt, drawn in [d/2, d]"),
    sdk::param::integer("backoff_max_ms", "5000", "[0, 600000]", "cap of the retry delay in ms, at least backoff_ms"),
    sdk::param::integer("max_range_bytes", "8388608", "[4096, 1073741824]",
                        "the largest range one request asks for; a larger read is split, adjacent reads merged up to it"),
    sdk::param::integer("coalesce_gap_bytes", "0", "[0, 1073741824]",
                        "reads of a batch at most this far apart are merged into one range; at most max_range_bytes"),
    sdk::param::choice("http_version", "auto", "auto|1.1|2",
                       "auto: HTTP/2 over TLS when the server offers it, else 1.1; 2 also tries h2 on http://"),
    sdk::param::boolean("tls_verify", "true", "verify the server's certificate and name; false is logged as a warning"),
    sdk::param::path("ca_bundle", "", "a readable PEM file of CA certificates to verify against; empty = the system's"),
    sdk::param::string("bearer_token_env", "",
                       "name of an environment variable whose token is sent as Authorization: Bearer; empty = none"),
    sdk::param::string("header_env", "",
                       "name of an environment variable holding one header line 'Name: value'; empty = none"),
};

sdk::Status create(const sdk::CreateArgs& args, std::unique_ptr<sdk::StorageBackend>& out,
                   std::vector<std::string>& unknown_params) {
  sdk::ParamReader params(args.params, kParams);
  if (!params.ok()) return params.status();
  Settings s;
  s.connections = params.get_int<long>("connections");
  s.connect_timeout_ms = params.get_int<long>("connect_timeout_ms");
  s.low_speed_bytes = params.get_int<long>("low_speed_bytes");
  s.low_speed_time_s = params.get_int<long>("low_speed_time_s");
  s.request_timeout_s = params.get_int<long>("request_timeout_s");
  s.retries = params.get_int<int>("retries");
  s.backoff_ms = params.get_int<long>("backoff_ms");
  s.backoff_max_ms = params.get_int<long>("backoff_max_ms");
  s.max_range_bytes = params.get_int<std::uint64_t>("max_range_bytes");
  s.coalesce_gap_bytes = params.get_int<std::uint64_t>("coalesce_gap_bytes");
  const std::string version = params.get_string("http_version");
  s.tls_verify = params.get_bool("tls_verify");
  s.ca_bundle = params.get_string("ca_bundle");
  const std::string bearer_env = params.get_string("bearer_token_env");
  const std::string header_env = params.get_string("header_env");
  unknown_params = params.unused();

  // What the table cannot say: bounds set by another parameter.
  if (s.backoff_max_ms < s.backoff_ms)
    return params.refuse("backoff_max_ms", std::to_string(s.backoff_max_ms) + " is below backoff_ms (" +
                                               std::to_string(s.backoff_ms) + ")");
  if (s.coalesce_gap_bytes > s.max_range_bytes)
    return params.refuse("coalesce_gap_bytes", std::to_string(s.coalesce_gap_bytes) + " is above max_range_bytes (" +
                                                   std::to_string(s.max_range_bytes) + ")");
  if (s.low_speed_bytes == 0) s.low_speed_time_s = 0;  // libcurl: both 0 turns the check off

  std::call_once(curl_initialised, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  const curl_version_info_data* info = curl_version_info(CURLVERSION_NOW);
  if (version == "auto") s.http_version = CURL_HTTP_VERSION_2TLS;
  else if (version == "1.1") s.http_version = CURL_HTTP_VERSION_1_1;
  else {  // "2": the reader refused anything but the three choices
    if ((info->features & CURL_VERSION_HTTP2) == 0)
      return sdk::Status::error(sdk::StatusCode::unsupported, "http_version: 2 asked, but this libcurl has no HTTP/2");
    s.http_version = CURL_HTTP_VERSION_2_0;
  }
  if (!s.ca_bundle.empty() && ::access(s.ca_bundle.c_str(), R_OK) != 0)
    return params.refuse("ca_bundle", "cannot read " + s.ca_bundle);
  for (const auto& [key, name, bearer] : {std::tuple{"bearer_token_env", bearer_env, true},
                                          std::tuple{"header_env", header_env, false}}) {
    if (name.empty()) continue;
    sdk::Status h = secret_header(name, bearer, s.headers);
    if (h.code == sdk::StatusCode::invalid_argument) return params.refuse(key, h.detail);
    if (!h.ok()) return sdk::Status::error(h.code, std::string(key) + ": " + h.detail);
  }
  if (!s.tls_verify && args.host != nullptr)
    args.host->log(sdk::LogLevel::warn, kComponent, "tls_verify is false: https certificates are not checked");

  auto transport = std::make_shared<Transport>(std::move(s), args.host);
  std::string error;
  if (!transport->start(error)) return sdk::Status::error(sdk::StatusCode::internal, error);
  out = std::make_unique<HttpBackend>(std::move(transport));
  return sdk::Status::success();
}

}  // namespace k3::storage::http

K3_PLUGIN(storage, "http", "1.0", k3::storage::http::create, nullptr)
K3_PLUGIN_PARAMS(k3::storage::http::kParams)
