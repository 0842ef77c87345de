// Reading a request within the limits (serve/http_request.hpp), on bytes in memory as a
// connection reads them: what is refused before any route or key, with which status, and
// what a complete request holds. And the options' ranges (serve/options.hpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>

#include <k3/error.hpp>
#include <k3/serve.hpp>

#include "serve/http_request.hpp"
#include "serve/options.hpp"

using k3::serve::HttpLimits;
using k3::serve::parse_http_request;

namespace {

const HttpLimits kLimits{1024, 20, 4096};

/// The status of the refusal (0: incomplete), or 200 for a request read whole.
int status_of(const std::string& bytes, const HttpLimits& limits = kLimits) {
  const auto p = parse_http_request(bytes, limits);
  return p.request ? 200 : p.refusal.status;
}

std::string post(const std::string& extra, const std::string& body) {
  return "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n" + body;
}

}  // namespace

TEST_CASE("http: a request is read whole, the body ends where its length says", "[serve][http]") {
  const std::string body = R"({"prompt":"x"})";
  const std::string bytes = post("Content-Length: " + std::to_string(body.size()) + "\r\n", body) +
                            "GET /next HTTP/1.1\r\n";
  const auto p = parse_http_request(bytes, kLimits);
  REQUIRE(p.request);
  CHECK(p.request->method == "POST");
  CHECK(p.request->path == "/v1/completions");
  CHECK(p.request->body == body);
  CHECK(p.request->header("host") == "x");
  CHECK(bytes.substr(p.consumed).rfind("GET /next", 0) == 0);  // the next request is left alone
  const auto q = parse_http_request("GET /health?x=1 HTTP/1.1\r\nHost: x\r\n\r\n", kLimits);
  REQUIRE(q.request);
  CHECK(q.request->path == "/health");
  CHECK(q.request->target == "/health?x=1");
  CHECK(status_of("GET /health HTTP/1.1\r\nHost: x\r\n") == 0);  // not all there yet
  CHECK(status_of(post("Content-Length: 10\r\n", "{}")) == 0);
}

TEST_CASE("http: header size and field count are bounded (431)", "[serve][http]") {
  CHECK(status_of("GET / HTTP/1.1\r\nX-Big: " + std::string(2000, 'a') + "\r\n\r\n") == 431);
  CHECK(status_of("GET /" + std::string(2000, 'a') + " HTTP/1.1\r\n\r\n") == 431);
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 21; ++i) many += "X-F" + std::to_string(i) + ": v\r\n";
  CHECK(status_of(many + "\r\n") == 431);
  std::string fine = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 20; ++i) fine += "X-F" + std::to_string(i) + ": v\r\n";
  CHECK(status_of(fine + "\r\n") == 200);
  // A header that never ends is cut at the limit, not read on.
  CHECK(status_of("GET / HTTP/1.1\r\n" + std::string(100000, 'x')) == 431);
}

TEST_CASE("http: bodies are bounded, chunked ones too (413)", "[serve][http]") {
  CHECK(status_of(post("Content-Length: 4097\r\n", "")) == 413);  // refused from the header
  const std::string big(5000, 'x');
  char size[16];
  std::snprintf(size, sizeof size, "%zx", big.size());
  CHECK(status_of(post("Transfer-Encoding: chunked\r\n", std::string(size) + "\r\n" + big + "\r\n0\r\n\r\n")) == 413);
  const auto p = parse_http_request(post("Transfer-Encoding: chunked\r\n", "2\r\n{}\r\n0\r\n\r\n"), kLimits);
  REQUIRE(p.request);
  CHECK(p.request->body == "{}");
}

TEST_CASE("http: framing that leaves the body's end unsure is refused (400), a POST without a length 411",
          "[serve][http]") {
  CHECK(status_of(post("Content-Length: 2\r\nContent-Length: 3\r\n", "{}x")) == 400);
  CHECK(status_of(post("Content-Length: 2, 3\r\n", "{}x")) == 400);
  CHECK(status_of(post("Content-Length: -2\r\n", "{}")) == 400);
  CHECK(status_of(post("Content-Length: 2\r\nContent-Length: 2\r\n", "{}")) == 200);  // the same value twice
  for (const char* te : {"gzip", "gzip, chunked", "chunked, gzip", "identity", "chunked;q=1"}) {
    const auto p = parse_http_request(post(std::string("Transfer-Encoding: ") + te + "\r\n", "0\r\n\r\n"), kLimits);
    CHECK_FALSE(p.request);
    CHECK(p.refusal.status == 400);
    CHECK(p.refusal.code == "bad_transfer_encoding");
  }
  CHECK(status_of(post("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", "0\r\n\r\n")) == 400);
  CHECK(status_of(post("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n")) == 400);
  const auto none = parse_http_request(post("", ""), kLimits);
  CHECK(none.refusal.status == 411);
  CHECK(none.refusal.code == "length_required");
  CHECK(status_of(post("Expect: something-else\r\nContent-Length: 2\r\n", "{}")) == 417);
  const auto cont = parse_http_request(post("Expect: 100-continue\r\nContent-Length: 2\r\n", "{}"), kLimits);
  REQUIRE(cont.request);
  CHECK(cont.request->expects_continue);
  CHECK(status_of("GARBAGE\r\n\r\n") == 400);
  CHECK(status_of("GET / HTTP/9.9\r\n\r\n") == 400);
}

TEST_CASE("serve options: every count and time has a range, NaN and infinity are refused", "[serve][options]") {
  auto refused = [](auto set) {
    k3::serve::ServeOptions o;
    set(o);
    try {
      k3::serve::check_options(o);
    } catch (const k3::UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  using O = k3::serve::ServeOptions;
  CHECK(refused([](O&) {}).empty());
  CHECK_THAT(refused([](O& o) { o.queue = 1000000; }), Catch::StartsWith("--queue"));
  CHECK_THAT(refused([](O& o) { o.request_timeout_seconds = 1e10; }), Catch::StartsWith("--request-timeout"));
  CHECK_THAT(refused([](O& o) { o.request_timeout_seconds = std::numeric_limits<double>::infinity(); }),
             Catch::StartsWith("--request-timeout"));
  CHECK_THAT(refused([](O& o) { o.read_timeout_seconds = std::nan(""); }), Catch::StartsWith("--read-timeout"));
  CHECK_THAT(refused([](O& o) { o.write_timeout_seconds = 0; }), Catch::StartsWith("--write-timeout"));
  CHECK_THAT(refused([](O& o) { o.header_timeout_seconds = -1; }), Catch::StartsWith("--header-timeout"));
  CHECK_THAT(refused([](O& o) { o.max_body_bytes = 0; }), Catch::StartsWith("--max-body"));
  CHECK_THAT(refused([](O& o) { o.default_max_tokens = 0; }), Catch::StartsWith("--max-tokens"));
  CHECK_THAT(refused([](O& o) { o.port = 65536; }), Catch::StartsWith("--port"));
  CHECK_THAT(refused([](O& o) { o.max_header_bytes = 10; }), Catch::StartsWith("--max-header-bytes"));
  CHECK_THAT(refused([](O& o) { o.max_header_fields = 0; }), Catch::StartsWith("--max-headers"));
  CHECK_THAT(refused([](O& o) { o.max_client_connections = 300; }), Catch::StartsWith("--max-client-connections"));
  CHECK_THAT(refused([](O& o) { o.snapshot_interval = 0; }), Catch::StartsWith("--snapshot-interval"));
  CHECK(refused([](O& o) {
          o.queue = 256;
          o.request_timeout_seconds = 604800;
          o.max_client_connections = o.max_connections;
        }).empty());
}
