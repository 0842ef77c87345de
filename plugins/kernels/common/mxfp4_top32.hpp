// MXFP4 weights as the SIMD sets look them up (docs/model-spec.md §4).
//
// Every weight E2M1[code]·2^(s-127) is a double whose mantissa has at most its top bit set,
// so its low 32 bits are zero and its top 32 bits say everything: a set can keep a scale
// byte's weights as 32-bit "top halves", look up many at once with a dword permute, and
// rebuild the doubles by putting each top half over 32 zero bits. The values are the same
// products as the scalar set's E2M1[code] · mxfp4_scale(s), computed at compile time;
// scale byte 255 gives ±0, as in the scalar set.
#pragma once
#include <array>
#include <bit>
#include <cstdint>

namespace k3::kernels {

/// E2M1[code]·2^(s-127) for code 0..15 (8..15 are the negatives of 0..7), 0 for s = 255.
constexpr double mxfp4_weight(unsigned s, unsigned code) {
  constexpr std::array<double, 8> kE2M1 = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  // 2^(s-127) from its bits (a normal double for s <= 254).
  const double scale = s == 255 ? 0.0 : std::bit_cast<double>(static_cast<std::uint64_t>(s + 896u) << 52);
  const double magnitude = kE2M1[code & 7u] * scale;
  return code < 8 ? magnitude : -magnitude;
}

/// The top 32 bits of mxfp4_weight(s, code). Evaluated at compile time, a weight with
/// nonzero low bits would fail the build.
constexpr std::uint32_t mxfp4_weight_top32(unsigned s, unsigned code) {
  const auto bits = std::bit_cast<std::uint64_t>(mxfp4_weight(s, code));
  if ((bits & 0xFFFFFFFFu) != 0) throw "an MXFP4 weight has nonzero low 32 bits";
  return static_cast<std::uint32_t>(bits >> 32);
}

/// The top halves of the weights of codes 0..Codes-1 for one scale byte (Codes = 16: every
/// weight; Codes = 8: the magnitudes), aligned to be one vector load.
template <unsigned Codes>
struct alignas(Codes * 4) Mxfp4Top32Table {
  std::array<std::uint32_t, Codes> top;
};

/// One table per scale byte 0..255, for a constexpr (constant-initialised) array.
template <unsigned Codes>
constexpr std::array<Mxfp4Top32Table<Codes>, 256> mxfp4_top32_tables() {
  std::array<Mxfp4Top32Table<Codes>, 256> out{};
  for (unsigned s = 0; s < 256; ++s)
    for (unsigned code = 0; code < Codes; ++code) out[s].top[code] = mxfp4_weight_top32(s, code);
  return out;
}

}  // namespace k3::kernels
