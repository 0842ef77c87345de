#include "io/uri.hpp"

#include <k3/checkpoint.hpp>

namespace k3 {
std::string checkpoint_file_uri(std::string_view checkpoint_uri, std::string_view name) {
  return io::join_uri(checkpoint_uri, name);
}
}  // namespace k3

namespace k3::io {

std::string join_uri(std::string_view base, std::string_view name) {
  std::string out(base);
  if (!out.empty() && out.back() != '/') out += '/';
  out += name;
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
