// The ranges of `k3host serve`'s options (docs/serve.md, "Start it"): each refused with a
// UsageError that names the flag, the range and the value. A bound protects something: a
// queue of a million (every waiting request holds a connection and its body), a timeout
// that overflows the clock (a deadline in the past ends every reply at its first token),
// NaN and infinity (which pass a "> 0" check).
#include "serve/options.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include <k3/error.hpp>

namespace k3::serve {
namespace {

std::string text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void count(const char* flag, std::uint64_t v, std::uint64_t lo, std::uint64_t hi) {
  if (v < lo || v > hi)
    throw UsageError(std::string(flag) + " must be an integer from " + std::to_string(lo) + " to " +
                     std::to_string(hi) + ", got " + std::to_string(v));
}

void seconds(const char* flag, double v, double hi) {
  if (!std::isfinite(v) || v <= 0 || v > hi)
    throw UsageError(std::string(flag) + " must be a number of seconds above 0 and at most " + text(hi) + ", got " +
                     text(v));
}

}  // namespace

void check_options(const ServeOptions& o) {
  if (o.port < 0 || o.port > 65535) throw UsageError("--port must be 0..65535, got " + std::to_string(o.port));
  count("--queue", o.queue, 0, kMaxQueue);
  count("--max-body", o.max_body_bytes, 1, kMaxBodyBytes);
  count("--max-header-bytes", o.max_header_bytes, kMinHeaderBytes, kMaxHeaderBytes);
  count("--max-headers", o.max_header_fields, 1, kMaxHeaderFields);
  count("--max-connections", o.max_connections, 1, kMaxConnections);
  count("--max-client-connections", o.max_client_connections, 1, o.max_connections);
  if (o.default_max_tokens < 1 || o.default_max_tokens > kMaxDefaultTokens)
    throw UsageError("--max-tokens must be an integer from 1 to " + std::to_string(kMaxDefaultTokens) + ", got " +
                     std::to_string(o.default_max_tokens));
  seconds("--header-timeout", o.header_timeout_seconds, kMaxIoSeconds);
  seconds("--read-timeout", o.read_timeout_seconds, kMaxIoSeconds);
  seconds("--write-timeout", o.write_timeout_seconds, kMaxIoSeconds);
  seconds("--request-timeout", o.request_timeout_seconds, kMaxRequestSeconds);
  if (o.snapshot_interval < 1 || o.snapshot_interval > kMaxSnapshotInterval)
    throw UsageError("--snapshot-interval must be an integer from 1 to " + std::to_string(kMaxSnapshotInterval) +
                     ", got " + std::to_string(o.snapshot_interval));
}

}  // namespace k3::serve
