// Random operands for the bit-identity tests. Values are drawn bit pattern by bit pattern so
// they cover what real activations and weights can hold: moderate values with mixed signs
// (heavy cancellation, so a different addition order shows up in the low bits), the whole
// fp32 exponent range (huge, tiny, subnormal), and signed zeros. inf and NaN only where a
// test asks for them.
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace k3simd {

class RandomInputs {
 public:
  explicit RandomInputs(std::uint64_t seed) : rng_(seed) {}

  std::uint32_t bits32() { return static_cast<std::uint32_t>(rng_()); }
  unsigned below(unsigned n) { return static_cast<unsigned>(rng_() % n); }

  /// An fp32 value: 60% moderate (|x| in [2^-8, 2^8)), 20% any finite exponent including
  /// subnormals, 10% a power-of-two neighbour of the moderate range, 10% a signed zero.
  float value() {
    const unsigned kind = below(10);
    const std::uint32_t sign = bits32() & 0x80000000u;
    const std::uint32_t mantissa = bits32() & 0x007FFFFFu;
    std::uint32_t exponent = 0;
    if (kind < 6) {
      exponent = 119 + below(16);  // 2^-8 .. 2^7
    } else if (kind < 8) {
      exponent = below(255);  // 0 (subnormal/zero) .. 254 (huge), never inf/NaN
    } else if (kind < 9) {
      exponent = 127 + below(3);
      return from_bits(sign | (exponent << 23));  // exactly ±1, ±2, ±4
    } else {
      return from_bits(sign);  // +0 or -0
    }
    return from_bits(sign | (exponent << 23) | mantissa);
  }

  std::vector<float> floats(std::size_t n) {
    std::vector<float> v(n);
    for (auto& f : v) f = value();
    return v;
  }

  /// bf16 weights: the top halves of value() (never inf/NaN).
  std::vector<std::uint16_t> bf16(std::size_t n) {
    std::vector<std::uint16_t> v(n);
    for (auto& h : v) h = static_cast<std::uint16_t>(to_bits(value()) >> 16);
    return v;
  }

  /// Random packed bytes (both nibbles, padding nibbles included: they must be ignored).
  std::vector<std::uint8_t> bytes(std::size_t n) {
    std::vector<std::uint8_t> v(n);
    for (auto& b : v) b = static_cast<std::uint8_t>(bits32());
    return v;
  }

  /// MXFP4 scale bytes: mostly realistic (2^-20 .. 2^8), with the edge bytes 0 (2^-127),
  /// 1, 252, 253, 254 (2^127) and 255 (group weight 0) mixed in.
  std::vector<std::uint8_t> scales(std::size_t n) {
    static constexpr std::uint8_t kEdges[] = {0, 1, 252, 253, 254, 255, 255};
    std::vector<std::uint8_t> v(n);
    for (auto& s : v) {
      const unsigned kind = below(10);
      s = kind < 7 ? static_cast<std::uint8_t>(107 + below(29)) : kEdges[below(sizeof kEdges)];
    }
    return v;
  }

  static float from_bits(std::uint32_t b) {
    float f;
    std::memcpy(&f, &b, sizeof f);
    return f;
  }
  static std::uint32_t to_bits(float f) {
    std::uint32_t b;
    std::memcpy(&b, &f, sizeof b);
    return b;
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace k3simd
