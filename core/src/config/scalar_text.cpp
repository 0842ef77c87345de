#include "config/scalar_text.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include "util/ascii.hpp"

namespace k3::config {

namespace {

std::string_view strip_plus(std::string_view text) {
  if (text.size() > 1 && text[0] == '+' && text[1] != '-') text.remove_prefix(1);
  return text;
}


}  // namespace

std::optional<std::int64_t> parse_int(std::string_view text) {
  text = strip_plus(text);
  std::int64_t v = 0;
  const auto res = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || res.ec != std::errc() || res.ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<double> parse_number(std::string_view text) {
  text = strip_plus(text);
  double v = 0;
  const auto res = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || res.ec != std::errc() || res.ptr != text.data() + text.size() || !std::isfinite(v))
    return std::nullopt;
  return v;
}

std::optional<bool> parse_bool(std::string_view text) {
  const std::string t = util::ascii_lower(text);
  if (t == "true" || t == "yes" || t == "on") return true;
  if (t == "false" || t == "no" || t == "off") return false;
  return std::nullopt;
}

std::string format_number(double v) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

}  // namespace k3::config
