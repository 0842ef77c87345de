// The origin (scheme, host, port) of an http(s) URL, to decide what a redirect may carry
// (pure, so tests can check it alone). The backend follows redirects itself: the secret
// header of bearer_token_env or header_env goes only to the origin of model.path, never to
// another scheme, host or port a server redirects to (a CDN, a signed-URL store); and a
// redirect from https to http is refused (the bytes would travel unprotected).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace k3::storage::http {

struct Origin {
  std::string scheme;  ///< "http" or "https"
  std::string host;    ///< lower case; an IPv6 literal keeps its brackets
  std::uint32_t port = 0;
  bool operator==(const Origin&) const = default;
};

/// The origin of an absolute http:// or https:// URL (scheme and host in any case; the
/// default port when none is written); nullopt for anything else.
inline std::optional<Origin> origin_of(std::string_view url) {
  const auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return out;
  };
  const auto sep = url.find("://");
  if (sep == std::string_view::npos) return std::nullopt;
  Origin o;
  o.scheme = lower(url.substr(0, sep));
  if (o.scheme != "http" && o.scheme != "https") return std::nullopt;
  std::string_view authority = url.substr(sep + 3);
  authority = authority.substr(0, authority.find_first_of("/?#"));
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) authority.remove_prefix(at + 1);
  std::string_view host = authority, port;
  if (authority.starts_with('[')) {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = authority.substr(0, close + 1);
    const std::string_view rest = authority.substr(close + 1);
    if (!rest.empty() && !rest.starts_with(':')) return std::nullopt;
    if (!rest.empty()) port = rest.substr(1);
  } else if (const auto colon = authority.find(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) return std::nullopt;
  o.host = lower(host);
  o.port = o.scheme == "https" ? 443 : 80;
  if (!port.empty()) {
    std::uint32_t p = 0;
    for (const char c : port) {
      if (c < '0' || c > '9' || p > 65535) return std::nullopt;
      p = p * 10 + static_cast<std::uint32_t>(c - '0');
    }
    if (p == 0 || p > 65535) return std::nullopt;
    o.port = p;
  }
  return o;
}

}  // namespace k3::storage::http
