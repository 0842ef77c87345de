#include "base64.hpp"

#include <array>
#include <cstdint>

namespace k3::tiktoken {

namespace {

constexpr std::uint8_t kBad = 0xFF;

constexpr std::array<std::uint8_t, 256> make_table() {
  std::array<std::uint8_t, 256> t{};
  t.fill(kBad);
  constexpr std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (std::size_t i = 0; i < alphabet.size(); ++i)
    t[static_cast<unsigned char>(alphabet[i])] = static_cast<std::uint8_t>(i);
  return t;
}
constexpr auto kTable = make_table();

}  // namespace

bool decode_base64(std::string_view in, std::string& out) {
  out.clear();
  if (in.size() % 4 != 0) return false;
  std::size_t pad = 0;
  if (!in.empty() && in.back() == '=') pad = (in.size() >= 2 && in[in.size() - 2] == '=') ? 2 : 1;
  out.reserve(in.size() / 4 * 3);
  for (std::size_t i = 0; i < in.size(); i += 4) {
    const bool last = i + 4 == in.size();
    const std::size_t real = last ? 4 - pad : 4;  // characters that carry bits in this quad
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      std::uint8_t d = 0;
      if (k < real) {
        d = kTable[static_cast<unsigned char>(in[i + k])];
        if (d == kBad) return false;
      }
      v = (v << 6) | d;
    }
    out.push_back(static_cast<char>((v >> 16) & 0xFFu));
    if (real >= 3) out.push_back(static_cast<char>((v >> 8) & 0xFFu));
    if (real == 4) out.push_back(static_cast<char>(v & 0xFFu));
    // Canonical form: the bits below the last full byte must be zero.
    if ((real == 2 && (v & 0xFFFFu) != 0) || (real == 3 && (v & 0xFFu) != 0)) return false;
  }
  return true;
}

}  // namespace k3::tiktoken
