#include "chat/xtml.hpp"

namespace k3::chat::detail {

std::string escape_attribute(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

std::string unescape_attribute(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (std::size_t i = 0; i < value.size();) {
    if (value.substr(i, 6) == "&quot;") {
      out += '"';
      i += 6;
    } else if (value.substr(i, 5) == "&amp;") {
      out += '&';
      i += 5;
    } else {
      out += value[i++];
    }
  }
  return out;
}

void SegmentWriter::open(std::string_view tag, const Attributes& attributes) {
  control(kOpen);
  text(tag);
  for (const auto& [key, value] : attributes) {
    text(" " + key);
    text("=\"");
    text(escape_attribute(value));
    text("\"");
  }
  control(kSep);
}

void SegmentWriter::close(std::string_view tag) {
  control(kClose);
  text(tag);
  control(kSep);
}

void SegmentWriter::end_message() {
  close("message");
  control(kEndOfMsg);
}

void SegmentWriter::internal_system_message(std::string_view type, std::string_view body) {
  open("message", {{"role", "system"}, {"type", std::string(type)}});
  const auto first = body.find_first_not_of(" \t\n\r\f\v");
  const auto last = body.find_last_not_of(" \t\n\r\f\v");
  if (first != std::string_view::npos) text(body.substr(first, last - first + 1));
  end_message();
}

}  // namespace k3::chat::detail
