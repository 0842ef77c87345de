// Reading one request within the limits (http_request.hpp). Every refusal here happens
// before the request reaches a route, so before the API key is checked: an unauthenticated
// client can hold no more than these limits allow.
#include "serve/http_request.hpp"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>

namespace k3::serve {

namespace http = boost::beast::http;

void configure(RequestParser& parser, const HttpLimits& limits) {
  parser.header_limit(static_cast<std::uint32_t>(
      std::min<std::size_t>(limits.header_bytes, std::numeric_limits<std::uint32_t>::max())));
  parser.body_limit(static_cast<std::uint64_t>(limits.body_bytes));
}

std::optional<HttpRefusal> check_head(const RequestParser& parser, const HttpLimits& limits) {
  const auto& msg = parser.get();
  const auto fields = static_cast<std::size_t>(std::distance(msg.begin(), msg.end()));
  if (fields > limits.header_fields)
    return HttpRefusal{431,
                       "The request has " + std::to_string(fields) + " header fields; at most " +
                           std::to_string(limits.header_fields) + " are accepted.",
                       "request_header_fields_too_large"};
  // Beast reads a body as chunked when `chunked` is the last coding and ignores codings it
  // does not know; then the body's end is unknown (another request could hide in it).
  std::size_t codings = 0;
  for (const auto& f : msg) {
    if (f.name() != http::field::transfer_encoding) continue;
    ++codings;
    if (codings > 1 || !boost::beast::iequals(f.value(), "chunked"))
      return HttpRefusal{400,
                         "Transfer-Encoding '" + std::string(f.value()) +
                             "' is not supported: send a Content-Length, or one Transfer-Encoding: chunked.",
                         "bad_transfer_encoding"};
  }
  for (const auto& f : msg) {
    if (f.name() == http::field::expect && !boost::beast::iequals(f.value(), "100-continue"))
      return HttpRefusal{417, "Expect '" + std::string(f.value()) + "' is not supported (only 100-continue).",
                         "expectation_failed"};
  }
  if (msg.method() == http::verb::post && !parser.content_length() && !parser.chunked())
    return HttpRefusal{411, "A POST needs a body with a Content-Length (or a chunked body).", "length_required"};
  return std::nullopt;
}

HttpRefusal refusal_of(const boost::system::error_code& error, const HttpLimits& limits) {
  if (error == http::error::header_limit || error == http::error::buffer_overflow)
    return {431, "The request line and header fields exceed " + std::to_string(limits.header_bytes) + " bytes.",
            "request_header_fields_too_large"};
  if (error == http::error::body_limit)
    return {413, "The request body is larger than " + std::to_string(limits.body_bytes) + " bytes.",
            "request_too_large"};
  if (error == http::error::bad_content_length)
    return {400, "The Content-Length is malformed, or given twice with different values.", "bad_content_length"};
  if (error == http::error::bad_transfer_encoding)
    return {400, "The Transfer-Encoding is malformed, repeated, or sent with a Content-Length.",
            "bad_transfer_encoding"};
  if (error == boost::beast::error::timeout) return {408, "The request was not received in time.", "request_timeout"};
  return {400, "Malformed HTTP request (" + error.message() + ").", "bad_request"};
}

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (boost::beast::iequals(k, boost::beast::string_view(name.data(), name.size()))) return v;
  return {};
}

HttpRequest request_of(const RequestParser& parser) {
  const auto& msg = parser.get();
  HttpRequest r;
  r.method = std::string(msg.method_string());
  r.target = std::string(msg.target());
  r.path = r.target.substr(0, r.target.find('?'));
  for (const auto& f : msg) r.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  r.body = msg.body();
  r.keep_alive = msg.keep_alive();
  r.expects_continue = boost::beast::iequals(msg[http::field::expect], "100-continue");
  return r;
}

ParsedHttp parse_http_request(std::string_view bytes, const HttpLimits& limits) {
  ParsedHttp out;
  out.refusal.status = 0;
  RequestParser parser;
  configure(parser, limits);
  boost::system::error_code ec;
  auto put = [&] {
    const std::size_t n =
        parser.put(boost::asio::const_buffer(bytes.data() + out.consumed, bytes.size() - out.consumed), ec);
    out.consumed += n;
    return n;
  };
  while (!parser.is_header_done()) {
    const std::size_t n = put();
    if (ec == http::error::need_more) return out;  // the header is not all there yet
    if (ec) {
      out.refusal = refusal_of(ec, limits);
      return out;
    }
    if (n == 0 && !parser.is_header_done()) return out;
  }
  if (auto refusal = check_head(parser, limits)) {
    out.refusal = std::move(*refusal);
    return out;
  }
  while (!parser.is_done()) {
    const std::size_t n = put();
    if (ec == http::error::need_more) return out;
    if (ec) {
      out.refusal = refusal_of(ec, limits);
      return out;
    }
    if (n == 0 && !parser.is_done()) return out;
  }
  out.request = request_of(parser);
  return out;
}

}  // namespace k3::serve
