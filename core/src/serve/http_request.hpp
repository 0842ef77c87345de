// Reading one HTTP/1.1 request within the server's limits, before any route or API key is
// looked at: Boost.Beast's parser, configured here, and the checks Beast leaves to us (the
// number of header fields, a transfer coding we do not know, a POST without a length).
// The server's connections and the fuzz harness (tests/fuzz/fuzz_serve_http.cpp) use these
// same functions, so what the harness reaches is what a client reaches (docs/serve.md,
// "Limits before the API key").
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

namespace k3::serve {

/// What one request may hold. The defaults are ServeOptions' (k3/serve.hpp).
struct HttpLimits {
  std::size_t header_bytes = 16384;  ///< the request line and every header field, together
  std::size_t header_fields = 100;
  std::size_t body_bytes = 1u << 20;
};

/// A request the HTTP layer answers itself: the status, one line saying why, and OpenAI's
/// error code for it (empty: none).
struct HttpRefusal {
  int status = 400;
  std::string message;
  std::string code;
};

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

/// Applies the limits to a fresh parser (header and body sizes; the body is read whole, and
/// a chunked body counts against the same limit).
void configure(RequestParser& parser, const HttpLimits& limits);

/// The checks on a complete header that Beast does not make: more fields than the limit
/// (431), a Transfer-Encoding other than exactly `chunked` (400: anything else would leave
/// the body's end unknown), a POST with neither Content-Length nor a chunked body (411, at
/// once rather than after a read timeout). nullopt: read the body.
std::optional<HttpRefusal> check_head(const RequestParser& parser, const HttpLimits& limits);

/// The answer to a parse error of Beast's (a header over the limit 431, a body over it 413,
/// conflicting Content-Length values or a bad transfer coding 400, a timeout 408, anything
/// malformed 400).
HttpRefusal refusal_of(const boost::system::error_code& error, const HttpLimits& limits);

/// The fields of a request the routes look at, copied out of Beast's message.
struct HttpRequest {
  std::string method;
  std::string target;  ///< as sent, query included
  std::string path;    ///< the target without its query
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool keep_alive = true;
  bool expects_continue = false;  ///< "Expect: 100-continue"
  /// The first value of a header field (case-insensitive name), empty when absent.
  [[nodiscard]] std::string header(std::string_view name) const;
};

/// Copies a parsed request out of the parser.
HttpRequest request_of(const RequestParser& parser);

/// The whole reading path on bytes already in memory, as a connection runs it: the header,
/// check_head, then the body. One request from the front of `bytes`; `consumed` is how many
/// bytes it took. Returns the request, or the refusal (a refusal with status 0: the bytes
/// end before the request does).
struct ParsedHttp {
  std::optional<HttpRequest> request;
  HttpRefusal refusal;
  std::size_t consumed = 0;
};
ParsedHttp parse_http_request(std::string_view bytes, const HttpLimits& limits);

}  // namespace k3::serve
