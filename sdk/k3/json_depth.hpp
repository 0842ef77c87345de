// k3host plugin SDK: the one bound on how deeply a JSON text may nest, checked before any
// JSON we read is parsed (a request body, config.json, the checkpoint index, a shard
// header, tokenizer_config.json, trunk.json, a chat history record). Parsers and
// serializers recurse or keep a stack per level: 60,000 nested brackets in a request once
// overflowed the server's stack in nlohmann's serializer. The scan here is linear, never
// recursive, allocates nothing and is safe on any bytes, so a text is refused for its depth
// before a parser sees it (docs/architecture.md, "Bad input"). It lives in the SDK because
// it is the one place both libk3core and the plugins may include. Header-only; not part of
// the plugin ABI. \since ABI 3
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace k3::sdk {

/// The deepest nesting of arrays and objects k3host reads: the files it reads nest a few
/// levels, an OpenAI request with a tool's JSON schema a dozen or two.
inline constexpr std::size_t kMaxJsonDepth = 64;

/// The byte offset of the first '[' or '{' that opens a level deeper than max_depth
/// (brackets inside strings do not count), or nullopt when the text nests at most that
/// deep. Invalid JSON is scanned the same way; its parser refuses it afterwards.
[[nodiscard]] constexpr std::optional<std::size_t> json_too_deep(std::string_view text,
                                                                 std::size_t max_depth = kMaxJsonDepth) noexcept {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character, a quote included, is part of the string
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

/// The one-line refusal: "<what>: JSON nested deeper than 64 levels (at byte N)".
[[nodiscard]] inline std::string json_depth_message(std::string_view what, std::size_t offset,
                                                    std::size_t max_depth = kMaxJsonDepth) {
  return std::string(what) + ": JSON nested deeper than " + std::to_string(max_depth) + " levels (at byte " +
         std::to_string(offset) + ")";
}

}  // namespace k3::sdk
