#include "chat/text_pieces.hpp"

namespace k3::chat::detail {

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
