// Storage `http`: reads files from an http:// or https:// URL with HTTP range requests.
//
// open() sends "Range: bytes=0-0": the size comes from Content-Range, and the ETag and
// Last-Modified are recorded (validators.hpp); a file with neither is refused unless
// `allow_unvalidated`. read() turns a batch into ranges (range_plan.hpp: large reads split,
// adjacent ones merged) and hands them to the Transport (transport.hpp), whose worker runs
// them on a pool of connections with retries, a deadline per range, redirects that keep the
// secret header on its origin, and a stop request honoured. Every answer must be of the
// version seen at open, or the read is refused as changed (never mixed bytes). The token or
// header named by a parameter is read from the environment at creation and never appears in
// a message.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <curl/curl.h>

#include <k3/plugin.hpp>
#include <k3/storage_extras.hpp>

#include "transport.hpp"

namespace {

namespace http = k3::storage::http;
using http::Identity;
using http::Settings;
using http::Transfer;
using http::Transport;
using k3::sdk::Status;
using k3::sdk::StatusCode;

constexpr std::string_view kComponent = "storage/http";

class HttpFile final : public k3::sdk::StorageFile, public k3::sdk::StorageFileVersion {
 public:
  HttpFile(std::shared_ptr<Transport> transport, Identity identity)
      : transport_(std::move(transport)),
        identity_(std::move(identity)),
        version_(identity_.version.etag            ? "ETag " + *identity_.version.etag
                 : identity_.version.last_modified ? "Last-Modified " + *identity_.version.last_modified
                                                   : std::string()) {}

  [[nodiscard]] std::uint64_t size() const noexcept override { return identity_.version.size; }
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
                                                                     std::to_string(r.offset) +
                                                                     " has no destination buffer");
        continue;
      }
      const std::uint64_t avail =
          r.offset >= identity_.version.size ? 0 : std::min(r.length, identity_.version.size - r.offset);
      if (avail < r.length)
        results[i] = Status::error(StatusCode::short_read, http::shown_url(identity_.url) + ": short read at offset " +
                                                               std::to_string(r.offset) + ": got " +
                                                               std::to_string(avail) + " of " +
                                                               std::to_string(r.length) + " bytes");
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
  Identity identity_;    ///< read by the worker during run(); never written after open
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
                             std::string(uri) +
                                 ": not an http:// or https:// URL (the http storage plugin reads URLs only)");
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
      if (!identity.version.validated()) {
        // Nothing but the size could tell a file replaced on the server while it is read.
        if (!transport_->settings().allow_unvalidated)
          return Status::error(StatusCode::invalid_argument,
                               http::shown_url(uri) +
                                   ": the server sends neither ETag nor Last-Modified, so a file changed on the server "
                                   "while it is read could not be noticed; serve it with a validator, or set the http "
                                   "parameter allow_unvalidated: true to read it anyway");
        const std::lock_guard lock(warned_mutex_);
        if (warned_.insert(identity.url).second && transport_->host() != nullptr)
          transport_->host()->log(
              k3::sdk::LogLevel::warn, kComponent,
              http::shown_url(uri) +
                  ": the server sends neither ETag nor Last-Modified: a change of the file on the "
                  "server while it is read is noticed only if its size changes (allow_unvalidated)");
      }
      out = std::make_unique<HttpFile>(transport_, std::move(identity));
      return Status::success();
    } catch (const std::exception& e) {
      return Status::error(StatusCode::out_of_memory, http::shown_url(uri) + ": " + e.what());
    }
  }

 private:
  std::shared_ptr<Transport> transport_;
  std::mutex warned_mutex_;
  std::set<std::string, std::less<>> warned_;  ///< URLs warned about as unvalidated (once each)
};

std::once_flag curl_initialised;  // trivially destructible; libcurl is never cleaned up

/// Reads the environment variable `name` into a header line; never shows its value. The
/// detail of an invalid_argument is about the parameter (the caller quotes its description).
Status secret_header(const std::string& name, bool bearer, std::vector<std::string>& headers) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr || *value == '\0')
    return Status::error(StatusCode::invalid_argument, "the environment variable " + name + " is not set or empty");
  const std::string_view v(value);
  if (v.find_first_of("\r\n") != std::string_view::npos)
    return Status::error(StatusCode::invalid_argument, "the environment variable " + name + " holds a line break");
  if (!bearer && (v.find(':') == std::string_view::npos || v.front() == ':'))
    return Status::error(StatusCode::invalid_argument,
                         "the environment variable " + name + " must hold one header line 'Name: value'");
  headers.push_back(bearer ? "Authorization: Bearer " + std::string(v) : std::string(v));
  return Status::success();
}

}  // namespace

namespace k3::storage::http {

constexpr k3::sdk::ParamDescriptor kParams[] = {
    sdk::param::integer("connections", "8", "[1, 256]",
                        "connections to the server (the pool; requests beyond it queue)"),
    sdk::param::integer("connect_timeout_ms", "10000", "[1, 600000]", "TCP + TLS handshake timeout in ms"),
    sdk::param::integer("low_speed_bytes", "1024", "[0, 1073741824]",
                        "a transfer slower than this many bytes/s for low_speed_time_s is a stall (timed out, "
                        "retried); 0 = no stall detection"),
    sdk::param::integer("low_speed_time_s", "30", "[1, 3600]", "seconds below low_speed_bytes that make a stall"),
    sdk::param::integer("request_timeout_s", "0", "[0, 86400]", "limit on one whole transfer in seconds; 0 = none"),
    sdk::param::integer("read_timeout_s", "60", "[0, 86400]",
                        "a range not read this many seconds after its first request fails (timed out; retries and "
                        "backoff included, the host does not retry it); 0 = no limit"),
    sdk::param::integer("retries", "4", "[0, 100]", "attempts after the first for a transient failure"),
    sdk::param::integer("backoff_ms", "100", "[0, 600000]",
                        "delay before the first retry in ms; doubles each attempt, drawn in [d/2, d]"),
    sdk::param::integer("backoff_max_ms", "5000", "[0, 600000]", "cap of the retry delay in ms, at least backoff_ms"),
    sdk::param::integer(
        "max_range_bytes", "8388608", "[4096, 1073741824]",
        "the largest range one request asks for; a larger read is split, adjacent reads merged up to it"),
    sdk::param::integer("coalesce_gap_bytes", "0", "[0, 1073741824]",
                        "reads of a batch at most this far apart are merged into one range; at most max_range_bytes"),
    sdk::param::choice("http_version", "auto", "auto|1.1|2",
                       "auto: HTTP/2 over TLS when the server offers it, else 1.1; 2 also tries h2 on http://"),
    sdk::param::boolean("tls_verify", "true", "verify the server's certificate and name; false is logged as a warning"),
    sdk::param::boolean("allow_unvalidated", "false",
                        "read files whose server sends neither ETag nor Last-Modified (a change while reading is then "
                        "noticed only by the size; warned once per file); false = refuse them at open"),
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
  s.read_timeout_s = params.get_int<long>("read_timeout_s");
  s.retries = params.get_int<int>("retries");
  s.backoff_ms = params.get_int<long>("backoff_ms");
  s.backoff_max_ms = params.get_int<long>("backoff_max_ms");
  s.max_range_bytes = params.get_int<std::uint64_t>("max_range_bytes");
  s.coalesce_gap_bytes = params.get_int<std::uint64_t>("coalesce_gap_bytes");
  const std::string version = params.get_string("http_version");
  s.tls_verify = params.get_bool("tls_verify");
  s.allow_unvalidated = params.get_bool("allow_unvalidated");
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
  if (version == "auto")
    s.http_version = CURL_HTTP_VERSION_2TLS;
  else if (version == "1.1")
    s.http_version = CURL_HTTP_VERSION_1_1;
  else {  // "2": the reader refused anything but the three choices
    if ((info->features & CURL_VERSION_HTTP2) == 0)
      return sdk::Status::error(sdk::StatusCode::unsupported, "http_version: 2 asked, but this libcurl has no HTTP/2");
    s.http_version = CURL_HTTP_VERSION_2_0;
  }
  if (!s.ca_bundle.empty() && ::access(s.ca_bundle.c_str(), R_OK) != 0)
    return params.refuse("ca_bundle", "cannot read " + s.ca_bundle);
  for (const auto& [key, name, bearer] :
       {std::tuple{"bearer_token_env", bearer_env, true}, std::tuple{"header_env", header_env, false}}) {
    if (name.empty()) continue;
    sdk::Status h = secret_header(name, bearer, s.secret_headers);
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

K3_PLUGIN(storage, "http", "1.0.0", k3::storage::http::create, nullptr)
K3_PLUGIN_PARAMS(k3::storage::http::kParams)
