#include "utf8.hpp"

namespace k3::tiktoken {

namespace {

bool is_continuation(unsigned char b) noexcept { return (b & 0xC0u) == 0x80u; }

}  // namespace

std::size_t find_invalid_utf8(std::string_view text) noexcept {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char b = s[i];
    if (b < 0x80u) {
      ++i;
      continue;
    }
    // Table 3-7 of the Unicode standard: the allowed range of the second byte depends on
    // the first, which rules out overlongs, surrogates and values above U+10FFFF.
    std::size_t len = 0;
    unsigned char lo = 0x80u, hi = 0xBFu;
    if (b >= 0xC2u && b <= 0xDFu) {
      len = 2;
    } else if (b == 0xE0u) {
      len = 3, lo = 0xA0u;
    } else if ((b >= 0xE1u && b <= 0xECu) || b == 0xEEu || b == 0xEFu) {
      len = 3;
    } else if (b == 0xEDu) {
      len = 3, hi = 0x9Fu;
    } else if (b == 0xF0u) {
      len = 4, lo = 0x90u;
    } else if (b >= 0xF1u && b <= 0xF3u) {
      len = 4;
    } else if (b == 0xF4u) {
      len = 4, hi = 0x8Fu;
    } else {
      return i;
    }
    if (i + len > n) return i;
    if (s[i + 1] < lo || s[i + 1] > hi) return i;
    for (std::size_t k = 2; k < len; ++k)
      if (!is_continuation(s[i + k])) return i;
    i += len;
  }
  return kValidUtf8;
}

char32_t next_code_point(std::string_view text, std::size_t& pos) noexcept {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data()) + pos;
  const unsigned char b = s[0];
  if (b < 0x80u) {
    pos += 1;
    return b;
  }
  if (b < 0xE0u) {
    pos += 2;
    return (char32_t{b & 0x1Fu} << 6) | (s[1] & 0x3Fu);
  }
  if (b < 0xF0u) {
    pos += 3;
    return (char32_t{b & 0x0Fu} << 12) | (char32_t{s[1] & 0x3Fu} << 6) | (s[2] & 0x3Fu);
  }
  pos += 4;
  return (char32_t{b & 0x07u} << 18) | (char32_t{s[1] & 0x3Fu} << 12) | (char32_t{s[2] & 0x3Fu} << 6) | (s[3] & 0x3Fu);
}

bool python_isspace(char32_t c) noexcept {
  if (c <= 0x20u) return c == 0x20u || (c >= 0x09u && c <= 0x0Du) || (c >= 0x1Cu && c <= 0x1Fu);
  switch (c) {
    case 0x85u:
    case 0xA0u:
    case 0x1680u:
    case 0x2028u:
    case 0x2029u:
    case 0x202Fu:
    case 0x205Fu:
    case 0x3000u: return true;
    default: return c >= 0x2000u && c <= 0x200Au;
  }
}

}  // namespace k3::tiktoken
