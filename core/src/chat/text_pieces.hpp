// A small text helper of the completion parser: the header of an XTML tag
// ("call tool=\"f\" index=\"1\"").
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "chat/xtml.hpp"

namespace k3::chat::detail {

struct TagHeader {
  std::string name;
  Attributes attributes;  ///< values unescaped
};

/// `name( key="value")*` exactly as SegmentWriter::open writes it; nullopt otherwise.
std::optional<TagHeader> parse_tag_header(std::string_view text);

}  // namespace k3::chat::detail
