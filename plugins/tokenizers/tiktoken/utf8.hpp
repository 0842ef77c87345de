// UTF-8 helpers for the tokenizer: validation with the offending byte offset, code point
// stepping over text that was already validated, and Python's str.isspace(), which the
// Kimi chunking rule is defined with.
#pragma once
#include <cstddef>
#include <string_view>

namespace k3::tiktoken {

inline constexpr std::size_t kValidUtf8 = static_cast<std::size_t>(-1);

/// Offset of the first byte that does not start a well-formed UTF-8 sequence (overlong
/// forms, surrogates and code points above U+10FFFF are ill-formed), or kValidUtf8.
std::size_t find_invalid_utf8(std::string_view text) noexcept;

/// Decodes the code point at text[pos] and advances pos past it. `text` must be valid UTF-8.
char32_t next_code_point(std::string_view text, std::size_t& pos) noexcept;

/// Python's str.isspace() for one code point: bidirectional class WS, B or S, or category
/// Zs. That is Unicode White_Space plus U+001C..U+001F.
bool python_isspace(char32_t c) noexcept;

}  // namespace k3::tiktoken
