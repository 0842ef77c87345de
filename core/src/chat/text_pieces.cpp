#include "chat/text_pieces.hpp"

namespace k3::chat::detail {

std::size_t whole_utf8_prefix(std::string_view bytes) {
  const std::size_t n = bytes.size();
  // The last byte that is not a continuation byte (10xxxxxx), looking back at most 3.
  for (std::size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto b = static_cast<unsigned char>(bytes[n - back]);
    if ((b & 0xC0) == 0x80) continue;
    std::size_t need = 0;
    if ((b & 0xE0) == 0xC0)
      need = 2;
    else if ((b & 0xF0) == 0xE0)
      need = 3;
    else if ((b & 0xF8) == 0xF0)
      need = 4;
    else
      return n;  // ASCII or a byte that cannot lead a sequence
    return back < need ? n - back : n;
  }
  return n;
}

std::optional<TagHeader> parse_tag_header(std::string_view text) {
  TagHeader h;
  std::size_t i = text.find(' ');
  h.name = std::string(text.substr(0, i));
  if (h.name.empty()) return std::nullopt;
  while (i < text.size()) {
    // ' ' key '="' value '"'
    const std::size_t eq = text.find("=\"", i + 1);
    if (eq == std::string_view::npos || eq == i + 1) return std::nullopt;
    const std::string_view key = text.substr(i + 1, eq - i - 1);
    if (key.find_first_of(" \"") != std::string_view::npos) return std::nullopt;
    const std::size_t end = text.find('"', eq + 2);
    if (end == std::string_view::npos) return std::nullopt;
    h.attributes.emplace_back(std::string(key), unescape_attribute(text.substr(eq + 2, end - eq - 2)));
    i = end + 1;
    if (i < text.size() && text[i] != ' ') return std::nullopt;
  }
  return h;
}

}  // namespace k3::chat::detail
