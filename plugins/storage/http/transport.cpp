// The http backend's worker: attempts, redirects, retries, deadlines and stop requests
// (transport.hpp says the rules).
#include "transport.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <utility>

#include "origin.hpp"

namespace k3::storage::http {

using k3::sdk::Status;
using k3::sdk::StatusCode;

namespace {

constexpr std::string_view kComponent = "storage/http";

bool is_redirect(long status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

/// A detail without its "<where>: " prefix.
std::string without_where(const std::string& detail, const std::string& where) {
  return detail.starts_with(where + ": ") ? detail.substr(where.size() + 2) : detail;
}

std::string seconds_text(double s) {
  char buf[32];
  if (s < 1)
    std::snprintf(buf, sizeof buf, "%.0f ms", s * 1000);
  else
    std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

}  // namespace

Transport::Transport(Settings settings, k3::sdk::HostServices* host) : settings_(std::move(settings)), host_(host) {}

bool Transport::start(std::string& error) {
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

Transport::~Transport() {
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
                   std::to_string(counters_.timeouts.load()) + " timed out, " + std::to_string(counters_.bytes.load()) +
                   " bytes, " + std::to_string(counters_.connects.load()) + " connections opened");
}

void Transport::run(std::span<Transfer> transfers) {
  if (transfers.empty()) return;
  Batch batch;
  batch.remaining = transfers.size();
  const auto now = Clock::now();
  {
    const std::lock_guard lock(mutex_);
    for (auto& t : transfers) {
      t.batch = &batch;
      t.handed_in = now;
      incoming_.push_back(&t);
    }
  }
  counters_.ranges += transfers.size();
  curl_multi_wakeup(multi_.get());
  std::unique_lock lock(batch.mutex);
  batch.done.wait(lock, [&] { return batch.remaining == 0; });
}

void Transport::finish(Transfer& t, Status st) {
  Batch& b = *t.batch;
  if (!st.ok() && !b.failed) b.failed = st;  // the batch's other ranges end with it (sweep)
  t.result = std::move(st);
  const std::lock_guard lock(b.mutex);
  if (--b.remaining == 0) b.done.notify_all();  // the host thread may now free t and b
}

EasyHandle Transport::take_easy() {
  if (!idle_.empty()) {
    EasyHandle e = std::move(idle_.back());
    idle_.pop_back();
    curl_easy_reset(e.get());
    return e;
  }
  return EasyHandle(curl_easy_init());
}

void Transport::launch(Transfer& t, bool hop) {
  t.reset_attempt();
  if (!hop) {
    ++t.attempt;
    t.url = t.identity->url;
    t.same_origin = true;
    t.hops = 0;
  }
  // The secret header goes to the file URL's origin only; the precondition goes everywhere.
  if (t.same_origin)
    for (const std::string& line : settings_.secret_headers)
      if (!append_header(t.request_headers, line.c_str()))
        return finish(t, Status::error(StatusCode::out_of_memory, t.where() + ": curl_slist_append failed"));
  if (!t.probe)
    if (const std::string pre = t.identity->version.precondition(); !pre.empty())
      if (!append_header(t.request_headers, pre.c_str()))
        return finish(t, Status::error(StatusCode::out_of_memory, t.where() + ": curl_slist_append failed"));
  t.easy = take_easy();
  CURL* e = t.easy.get();
  if (e == nullptr) return finish(t, Status::error(StatusCode::out_of_memory, t.where() + ": curl_easy_init failed"));
  const std::string range = std::to_string(t.range.first) + "-" + std::to_string(t.range.end - 1);
  const Settings& s = settings_;
  curl_easy_setopt(e, CURLOPT_URL, t.url.c_str());
  curl_easy_setopt(e, CURLOPT_RANGE, range.c_str());  // libcurl copies strings
  curl_easy_setopt(e, CURLOPT_PRIVATE, &t);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t.errbuf);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, on_prereq);
  curl_easy_setopt(e, CURLOPT_PREREQDATA, &t);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);  // followed here (follow_redirect): headers by origin
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
  if (t.request_headers) curl_easy_setopt(e, CURLOPT_HTTPHEADER, t.request_headers.get());
  ++counters_.attempts;
  if (curl_multi_add_handle(multi_.get(), e) != CURLM_OK) {
    idle_.push_back(std::move(t.easy));
    return finish(t, Status::error(StatusCode::internal, t.where() + ": curl_multi_add_handle failed"));
  }
  active_.push_back(&t);
}

void Transport::guarded_launch(Transfer& t, bool hop) noexcept {
  try {
    launch(t, hop);
  } catch (...) {
    if (t.easy) detach(t);
    finish(t, Status{StatusCode::out_of_memory, {}});
  }
}

void Transport::detach(Transfer& t) {
  long connects = 0;
  if (curl_easy_getinfo(t.easy.get(), CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK && connects > 0)
    counters_.connects += static_cast<std::uint64_t>(connects);
  counters_.bytes += t.received;
  curl_multi_remove_handle(multi_.get(), t.easy.get());
  if (idle_.size() < static_cast<std::size_t>(settings_.connections) * 4) idle_.push_back(std::move(t.easy));
  t.easy.reset();
  std::erase(active_, &t);
}

bool Transport::follow_redirect(Transfer& t, const std::string& to_url) {
  const auto refuse = [&](const std::string& why) {
    finish(t, Status::error(StatusCode::io_error, t.where() + ": " + why));
    return false;
  };
  if (++t.hops > kMaxRedirects) return refuse("too many redirects (more than " + std::to_string(kMaxRedirects) + ")");
  const auto to = origin_of(to_url);
  if (!to) return refuse("a redirect to '" + shown_url(to_url) + "': only http:// and https:// are followed");
  const auto from = origin_of(t.identity->url);
  if (from && from->scheme == "https" && to->scheme == "http")
    return refuse("a redirect from https to http ('" + shown_url(to_url) +
                  "') is refused: the bytes would travel unprotected");
  t.url = to_url;
  t.same_origin = from && *from == *to;
  return true;
}

void Transport::settle(Transfer& t, CURLcode rc) {
  if (rc == CURLE_OK && !t.refused && is_redirect(t.headers.status)) {
    // The Location as libcurl resolved it against the URL asked for (absolute); without
    // one the answer is judged like any other.
    char* location = nullptr;
    if (curl_easy_getinfo(t.easy.get(), CURLINFO_REDIRECT_URL, &location) == CURLE_OK && location != nullptr) {
      const std::string to_url(location);
      detach(t);
      if (follow_redirect(t, to_url)) guarded_launch(t, true);
      return;
    }
  }
  detach(t);
  const auto now = Clock::now();
  if (t.started == Clock::time_point{}) t.started = now;  // reached the server, or failed to
  Verdict v;
  try {
    v = judge(t, rc);
  } catch (...) {
    return finish(t, Status::error(StatusCode::out_of_memory, "http: out of memory"));
  }
  if (v.status.ok()) return finish(t, std::move(v.status));
  t.last_failure = without_where(v.status.detail, t.where());
  if (!v.retry || t.attempt > settings_.retries) {
    if (t.attempt > 1) v.status.detail += " (after " + std::to_string(t.attempt) + " attempts)";
    return finish(t, std::move(v.status));
  }
  // Exponential backoff, full jitter over its upper half: [d/2, d].
  const double base =
      std::min(static_cast<double>(settings_.backoff_max_ms),
               static_cast<double>(settings_.backoff_ms) * std::ldexp(1.0, std::min(t.attempt - 1, 20)));
  std::uniform_real_distribution<double> jitter(0.5, 1.0);
  const auto delay = std::chrono::duration<double, std::milli>(base * jitter(rng_));
  t.not_before = now + std::chrono::duration_cast<Clock::duration>(delay);
  if (settings_.read_timeout_s > 0 && t.not_before >= t.started + std::chrono::seconds(settings_.read_timeout_s)) {
    // The next attempt would start past the deadline: the range ends now.
    std::optional<Status> st = overdue(t, t.not_before);
    if (st && st->code == StatusCode::timed_out) ++counters_.timeouts;
    return finish(t, st ? std::move(*st) : std::move(v.status));
  }
  ++counters_.retries;
  warn_retry(v.status.detail + " (attempt " + std::to_string(t.attempt) + " of " +
             std::to_string(settings_.retries + 1) + "; retrying in " + seconds_text(delay.count() / 1000.0) + ")");
  waiting_.push_back(&t);
}

std::optional<Status> Transport::overdue(const Transfer& t, Clock::time_point now) const {
  if (t.batch->failed) return *t.batch->failed;
  if (stop_seen_ && now >= std::max(*stop_seen_, t.handed_in) + kStopGrace)
    return Status::error(StatusCode::interrupted, t.where() + ": abandoned, the run is stopping");
  const auto limit = std::chrono::seconds(settings_.read_timeout_s);
  if (settings_.read_timeout_s > 0 && t.started != Clock::time_point{} && now >= t.started + limit)
    return Status::error(StatusCode::timed_out,
                         t.where() + ": not read within read_timeout_s = " + std::to_string(settings_.read_timeout_s) +
                             " s of its first request (" + std::to_string(t.attempt) +
                             (t.attempt == 1 ? " attempt" : " attempts") +
                             (t.last_failure.empty() ? "; the server sent nothing more)"
                                                     : "; the last failed: " + t.last_failure + ")"));
  return std::nullopt;
}

void Transport::sweep(Clock::time_point now) {
  std::vector<std::pair<Transfer*, Status>> ended;
  for (Transfer* t : active_)
    if (auto st = overdue(*t, now)) ended.emplace_back(t, std::move(*st));
  for (auto& [t, st] : ended) {
    detach(*t);
    if (st.code == StatusCode::timed_out) ++counters_.timeouts;
    finish(*t, std::move(st));
  }
  std::erase_if(waiting_, [&](Transfer* t) {
    auto st = overdue(*t, now);
    if (!st) return false;
    if (st->code == StatusCode::timed_out) ++counters_.timeouts;
    finish(*t, std::move(*st));
    return true;
  });
}

void Transport::warn_retry(const std::string& line) {
  if (host_ == nullptr) return;
  // A warning says a read is in trouble; one line a second is enough to say it (a dead
  // server fails every range in flight at once).
  const auto now = Clock::now();
  if (last_warning_ == Clock::time_point{} || now - last_warning_ >= std::chrono::seconds(1)) {
    host_->log(k3::sdk::LogLevel::warn, kComponent,
               line + (unwarned_ == 0
                           ? ""
                           : " [and " + std::to_string(unwarned_) + " more retries since the last warning]"));
    last_warning_ = now;
    unwarned_ = 0;
    return;
  }
  ++unwarned_;
  host_->log(k3::sdk::LogLevel::debug, kComponent, line);
}

void Transport::work() {
  std::vector<Transfer*> fresh;
  for (;;) {
    {
      const std::lock_guard lock(mutex_);
      if (stopping_) return;
      fresh.assign(incoming_.begin(), incoming_.end());
      incoming_.clear();
    }
    for (Transfer* t : fresh) guarded_launch(*t, false);
    auto now = Clock::now();
    if (host_ != nullptr && host_->stop_requested()) {
      if (!stop_seen_) stop_seen_ = now;
    } else {
      stop_seen_.reset();
    }
    sweep(now);
    std::erase_if(waiting_, [&](Transfer* t) {
      if (t->not_before > now) return false;
      guarded_launch(*t, false);
      return true;
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
        settle(*t, rc);
      } catch (...) {  // out of memory while formatting: the transfer still finishes
        if (t->easy) detach(*t);
        std::erase(waiting_, t);
        finish(*t, Status{StatusCode::out_of_memory, {}});
      }
    }
    // Sleep until a socket wakes the worker, or a retry is due; at most 100 ms while anything
    // is waited for, so a deadline or a stop request is seen in time.
    int timeout_ms = active_.empty() && waiting_.empty() ? 1000 : 100;
    now = Clock::now();
    for (const Transfer* t : waiting_) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t->not_before - now).count();
      timeout_ms = static_cast<int>(std::clamp<long long>(ms, 0, timeout_ms));
    }
    if (running > 0 || timeout_ms > 0) curl_multi_poll(multi_.get(), nullptr, 0, timeout_ms, nullptr);
  }
}

}  // namespace k3::storage::http
