// Small text helpers of the completion parser: where a byte string stops being whole UTF-8
// characters, and the header of an XTML tag ("call tool=\"f\" index=\"1\"").
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "chat/xtml.hpp"

namespace k3::chat::detail {

/// The length of the longest prefix of `bytes` that does not end inside a multi-byte UTF-8
/// character: a trailing lead byte still missing continuation bytes is held back. Bytes that
/// can never become valid UTF-8 are not held (they would wait forever).
std::size_t whole_utf8_prefix(std::string_view bytes);

struct TagHeader {
  std::string name;
  Attributes attributes;  ///< values unescaped
};

/// `name( key="value")*` exactly as SegmentWriter::open writes it; nullopt otherwise.
std::optional<TagHeader> parse_tag_header(std::string_view text);

}  // namespace k3::chat::detail
