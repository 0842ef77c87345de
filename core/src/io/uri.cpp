#include "io/uri.hpp"

#include <k3/checkpoint.hpp>

namespace k3 {
std::string checkpoint_file_uri(std::string_view checkpoint_uri, std::string_view name) {
  return io::join_uri(checkpoint_uri, name);
}
}  // namespace k3

namespace k3::io {

namespace {

bool is_web_url(std::string_view base) noexcept {
  const auto starts = [&](std::string_view scheme) {
    if (base.size() < scheme.size()) return false;
    for (std::size_t i = 0; i < scheme.size(); ++i) {
      const char c = base[i];
      if ((c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c) != scheme[i]) return false;
    }
    return true;
  };
  return starts("http://") || starts("https://");
}

bool unreserved(unsigned char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~';
}

}  // namespace

std::string join_uri(std::string_view base, std::string_view name) {
  std::string out(base);
  if (!out.empty() && out.back() != '/') out += '/';
  if (!is_web_url(base)) {
    out += name;
    return out;
  }
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (unreserved(c)) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string plain_name_problem(std::string_view name) {
  if (name.empty()) return "an empty name";
  if (name == "." || name == "..") return "'" + std::string(name) + "' is a folder";
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == '/' || ch == '\\') return "it holds a path separator '" + std::string(1, ch) + "'";
    if (ch == '%') return "it holds '%' (a URL would read it as an escape)";
    if (c < 0x20 || c == 0x7f) return "it holds a control character";
  }
  return {};
}

std::string shown_name(std::string_view name) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;
    }
  }
  return out;
}

bool has_uri_scheme(std::string_view text) noexcept {
  const auto colon = text.find("://");
  if (colon == std::string_view::npos || colon == 0) return false;
  auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  if (!letter(text[0])) return false;
  for (std::size_t i = 1; i < colon; ++i) {
    const char c = text[i];
    if (!letter(c) && !(c >= '0' && c <= '9') && c != '+' && c != '-' && c != '.') return false;
  }
  return true;
}

}  // namespace k3::io
