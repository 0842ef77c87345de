// One range request's callbacks and the judgement of a finished attempt (transfer.hpp).
#include "transfer.hpp"

#include <string_view>
#include <utility>

namespace k3::storage::http {

using k3::sdk::Status;
using k3::sdk::StatusCode;

std::string Transfer::where() const {
  return shown_url(identity->url) + ": bytes " + std::to_string(range.first) + "-" + std::to_string(range.end - 1);
}

void Transfer::reset_attempt() {
  headers = {};
  received = 0;
  cursor = 0;
  body_started = false;
  refused.reset();
  errbuf[0] = '\0';
  request_headers.reset();
}

bool Transfer::accept_headers() {
  if (headers.status == 200) {
    refused =
        Status::error(StatusCode::io_error, where() +
                                                ": the server ignored the Range header (200 with the whole body); "
                                                "the http backend needs a server that answers range requests with 206");
    return false;
  }
  if (headers.status != 206) return true;  // an error page or a redirect: dropped, judged at the end
  const auto cr = headers.content_range ? parse_content_range(*headers.content_range) : std::nullopt;
  if (!cr || cr->unsatisfied || cr->first != range.first || cr->last != range.end - 1) {
    refused = Status::error(StatusCode::io_error, where() + ": wrong Content-Range '" +
                                                      headers.content_range.value_or("(none)") + "' in a 206 answer");
    return false;
  }
  if (probe) return true;
  if (const std::string what = identity->version.differs(cr->total, headers.etag, headers.last_modified);
      !what.empty()) {
    refused = Status::error(StatusCode::io_error, changed_message(where(), what));
    return false;
  }
  return true;
}

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
  if (t.headers.status != 206) return n;  // an error or redirect body: read and dropped
  if (t.received + n > t.range.length()) {
    t.refused = Status::error(StatusCode::io_error, t.where() + ": the server sent more bytes than the range holds");
    return 0;
  }
  if (!t.probe) scatter(t.range, t.cursor, t.range.first + t.received, reinterpret_cast<const std::byte*>(data), n);
  t.received += n;
  return n;
}

int on_prereq(void* user, char*, char*, int, int) noexcept {
  auto& t = *static_cast<Transfer*>(user);
  if (t.started == Clock::time_point{}) t.started = Clock::now();
  return CURL_PREREQFUNC_OK;
}

namespace {

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
    case CURLE_URL_MALFORMAT: return "not a valid URL";
    default: return "transfer failed";
  }
}

/// The probe's answer: the file's size and validators.
void record_version(Transfer& t, std::uint64_t size) {
  t.identity->version.size = size;
  t.identity->version.etag = t.headers.etag;
  t.identity->version.last_modified = t.headers.last_modified;
}

}  // namespace

Verdict judge(Transfer& t, CURLcode rc) {
  if (t.refused) return {false, std::move(*t.refused)};
  if (rc != CURLE_OK) {
    std::string why = curl_failure_class(rc) + " (" + (t.errbuf[0] != '\0' ? t.errbuf : curl_easy_strerror(rc)) + ")";
    // A URL libcurl cannot parse (a model.path with a space) is the configuration's fault.
    const StatusCode code = rc == CURLE_URL_MALFORMAT ? StatusCode::invalid_argument : StatusCode::io_error;
    return {transient_curl_error(rc), Status::error(code, t.where() + ": " + why)};
  }
  const long s = t.headers.status;
  if (t.probe && (s == 416 || s == 200)) {
    // An empty object: 416 with "bytes */0", or (nginx) 200 with an empty body, which is the
    // whole object (a non-empty body would have been refused in on_body).
    const auto cr = t.headers.content_range ? parse_content_range(*t.headers.content_range) : std::nullopt;
    if (s == 200 || (cr && cr->unsatisfied && cr->total)) {
      record_version(t, s == 200 ? 0 : *cr->total);
      return {};
    }
  }
  if (s == 206) {
    if (t.received != t.range.length())
      return {true,
              Status::error(StatusCode::io_error, t.where() + ": truncated body: got " + std::to_string(t.received) +
                                                      " of " + std::to_string(t.range.length()) + " bytes")};
    if (t.probe) {
      const auto cr = parse_content_range(*t.headers.content_range);  // checked in accept_headers
      if (!cr || !cr->total)
        return {false,
                Status::error(StatusCode::io_error, t.where() + ": Content-Range '" + *t.headers.content_range +
                                                        "' gives no size; the http backend needs the object's size")};
      record_version(t, *cr->total);
    }
    return {};
  }
  const std::string code = "HTTP " + std::to_string(s);
  if (s >= 500 || s == 408 || s == 429) return {true, Status::error(StatusCode::io_error, t.where() + ": " + code)};
  if (s == 404 || s == 410)
    return {false, Status::error(StatusCode::not_found, t.where() + ": " + code + " (no such file)")};
  if (s == 401 || s == 403)
    return {false, Status::error(StatusCode::io_error,
                                 t.where() + ": " + code + " (access denied: check the token or the presigned URL)")};
  if (s == 412 && !t.probe)  // the server checked the precondition the request carried
    return {false, Status::error(StatusCode::io_error,
                                 changed_message(t.where(), "the server answered 412 to '" +
                                                                t.identity->version.precondition() + "'"))};
  if (s == 416)
    return {false,
            Status::error(StatusCode::io_error,
                          t.where() + ": " + code + " (range not satisfiable: the object is shorter than at open)")};
  if (s == 200)  // an empty body, so on_body never saw it
    return {false, Status::error(StatusCode::io_error, t.where() + ": the server ignored the Range header (200)")};
  if (s >= 300 && s < 400)
    return {false, Status::error(StatusCode::io_error, t.where() + ": " + code + " without a Location to follow")};
  return {false, Status::error(StatusCode::io_error, t.where() + ": unexpected " + code)};
}

}  // namespace k3::storage::http
