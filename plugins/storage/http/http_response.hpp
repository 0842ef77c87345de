// What the http backend reads from a response's header lines (pure, so tests can check it
// alone): the status code, Content-Range, ETag and Last-Modified. A redirect's headers are
// dropped when the next status line arrives, so only the final response counts.
#pragma once
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace k3::storage::http {

struct ContentRange {
  bool unsatisfied = false;  ///< "bytes */N" (a 416 answer)
  std::uint64_t first = 0, last = 0;
  std::optional<std::uint64_t> total;  ///< absent for "bytes a-b/*"
};

/// Parses a Content-Range value: "bytes a-b/N", "bytes a-b/*" or "bytes */N".
inline std::optional<ContentRange> parse_content_range(std::string_view v) noexcept {
  auto number = [](std::string_view s, std::uint64_t& out) {
    const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
    return !s.empty() && r.ec == std::errc{} && r.ptr == s.data() + s.size();
  };
  if (!v.starts_with("bytes ")) return std::nullopt;
  v.remove_prefix(6);
  const auto slash = v.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const std::string_view span = v.substr(0, slash), total = v.substr(slash + 1);
  ContentRange out;
  if (total != "*") {
    std::uint64_t t = 0;
    if (!number(total, t)) return std::nullopt;
    out.total = t;
  }
  if (span == "*") {
    if (!out.total) return std::nullopt;
    out.unsatisfied = true;
    return out;
  }
  const auto dash = span.find('-');
  if (dash == std::string_view::npos || !number(span.substr(0, dash), out.first) ||
      !number(span.substr(dash + 1), out.last) || out.last < out.first)
    return std::nullopt;
  return out;
}

struct ResponseHeaders {
  long status = 0;
  std::optional<std::string> content_range, etag, last_modified;

  /// Feeds one raw header line (with or without CRLF), as libcurl's header callback gets it.
  void feed(std::string_view line) {
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
    if (line.starts_with("HTTP/")) {  // a new response (after a redirect or 100 Continue)
      *this = {};
      const auto sp = line.find(' ');
      if (sp != std::string_view::npos) {
        const std::string_view code = line.substr(sp + 1, 3);
        long c = 0;
        if (std::from_chars(code.data(), code.data() + code.size(), c).ec == std::errc{}) status = c;
      }
      return;
    }
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) return;
    std::string name(line.substr(0, colon));
    for (char& ch : name) ch = static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (name == "content-range")
      content_range = std::string(value);
    else if (name == "etag")
      etag = std::string(value);
    else if (name == "last-modified")
      last_modified = std::string(value);
  }
};

/// A URL fit for messages: the query string (a presigned URL's signature) is cut.
inline std::string shown_url(std::string_view url) {
  const auto q = url.find('?');
  return q == std::string_view::npos ? std::string(url) : std::string(url.substr(0, q)) + "?…";
}

}  // namespace k3::storage::http
