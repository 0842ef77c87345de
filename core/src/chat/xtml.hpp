// XTML, K3's markup: elements opened and closed by control tokens. The writer appends
// segments the way K3's reference encoder cuts them (docs/chat.md, "Segments"): each control
// token, the tag name, and per attribute ` key`, `="`, the escaped value and `"` are
// separate segments; empty text segments are dropped.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <k3/chat.hpp>

namespace k3::chat::detail {

inline constexpr std::string_view kOpen = "<|open|>";
inline constexpr std::string_view kClose = "<|close|>";
inline constexpr std::string_view kSep = "<|sep|>";
inline constexpr std::string_view kEndOfMsg = "<|end_of_msg|>";
inline constexpr std::string_view kEos = "[EOS]";

using Attributes = std::vector<std::pair<std::string, std::string>>;

/// `&` -> `&amp;` then `"` -> `&quot;`; nothing else (the reference leaves < and > alone).
std::string escape_attribute(std::string_view value);
/// The inverse: `&quot;` -> `"` and `&amp;` -> `&`, in one left-to-right pass.
std::string unescape_attribute(std::string_view value);

class SegmentWriter {
 public:
  void control(std::string_view token) { out_.push_back({std::string(token), true}); }
  void text(std::string_view text) {
    if (!text.empty()) out_.push_back({std::string(text), false});
  }
  void open(std::string_view tag, const Attributes& attributes = {});
  void close(std::string_view tag);
  /// <|close|>message<|sep|><|end_of_msg|>
  void end_message();
  /// A system message the encoder itself adds (thinking effort, tool choice): body stripped
  /// of surrounding whitespace, as the reference does.
  void internal_system_message(std::string_view type, std::string_view body);
  std::vector<Segment> take() { return std::move(out_); }

 private:
  std::vector<Segment> out_;
};

}  // namespace k3::chat::detail
