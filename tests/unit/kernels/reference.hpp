// Test-side references for the kernel contract, written independently of the plugin
// sources: weights are decoded from the bit layout (not from a table), the reduction is
// written as eight strided lanes (not as acc[i % 8]), and a naive long-double sum gives
// the "true" value with a derived error bound.
#pragma once
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <k3/kernels.hpp>

namespace k3test {

// --- Decoding, from the formats' definitions --------------------------------------------

inline float bf16_value(std::uint16_t bits) { return std::bit_cast<float>(std::uint32_t{bits} << 16); }

/// fp32 -> bf16 by truncation (the tests only need some bf16 value, not a rounding rule).
inline std::uint16_t bf16_bits(float v) { return static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(v) >> 16); }

/// E2M1 from its bits: s|e1 e0|m. Exponent 0 is subnormal (m·0.5), else (1 + m/2)·2^(e-1).
inline double e2m1_value(unsigned code) {
  const unsigned sign = (code >> 3) & 1u;
  const unsigned exponent = (code >> 1) & 3u;
  const unsigned mantissa = code & 1u;
  const double magnitude = exponent == 0 ? 0.5 * mantissa : (1.0 + 0.5 * mantissa) * double(1u << exponent) / 2.0;
  return sign != 0 ? -magnitude : magnitude;
}

/// 2^(s-127) built from the fp64 exponent field; 255 is the zero group.
inline double mxfp4_scale_value(std::uint8_t s) {
  if (s == 255) return 0.0;
  const std::uint64_t biased = std::uint64_t(int(s) - 127 + 1023);
  return std::bit_cast<double>(biased << 52);
}

/// A dense MXFP4 matrix with its own storage, in the SDK layout.
struct Mxfp4Owned {
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::vector<std::uint8_t> packed;  // [rows, ceil(cols/2)]
  std::vector<std::uint8_t> scales;  // [rows, ceil(cols/32)]

  Mxfp4Owned(std::size_t r, std::size_t c)
      : rows(r), cols(c), packed(r * ((c + 1) / 2), 0), scales(r * ((c + 31) / 32), 127) {}
  [[nodiscard]] std::size_t packed_stride() const { return (cols + 1) / 2; }
  [[nodiscard]] std::size_t scale_stride() const { return (cols + 31) / 32; }
  void set_code(std::size_t r, std::size_t c, unsigned code) {
    std::uint8_t& byte = packed[r * packed_stride() + c / 2];
    if (c % 2 == 0)
      byte = static_cast<std::uint8_t>((byte & 0xF0u) | (code & 0xFu));
    else
      byte = static_cast<std::uint8_t>((byte & 0x0Fu) | ((code & 0xFu) << 4));
  }
  [[nodiscard]] unsigned code(std::size_t r, std::size_t c) const {
    const std::uint8_t byte = packed[r * packed_stride() + c / 2];
    return c % 2 == 0 ? (byte & 0xFu) : (byte >> 4);
  }
  void set_scale(std::size_t r, std::size_t group, std::uint8_t s) { scales[r * scale_stride() + group] = s; }
  [[nodiscard]] double weight(std::size_t r, std::size_t c) const {
    return e2m1_value(code(r, c)) * mxfp4_scale_value(scales[r * scale_stride() + c / 32]);
  }
  [[nodiscard]] k3::sdk::Mxfp4Matrix view() const { return {packed.data(), scales.data(), rows, cols}; }
};

// --- The contract's reduction, written independently --------------------------------------

/// Lane k sums products k, k+8, k+16, ... from +0.0 in order; then the fixed tree.
inline double contract_sum(const std::vector<double>& products) {
  double lane[8];
  for (std::size_t k = 0; k < 8; ++k) {
    double s = 0.0;
    for (std::size_t i = k; i < products.size(); i += 8) s += products[i];
    lane[k] = s;
  }
  return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

/// The exact products of one weight row and one activation row.
template <class WeightAt>
std::vector<double> row_products(WeightAt weight_at, const float* x, std::size_t cols) {
  std::vector<double> p(cols);
  for (std::size_t c = 0; c < cols; ++c) p[c] = weight_at(c) * double(x[c]);
  return p;
}

// --- Naive long-double reference and its bound ------------------------------------------------

struct NaiveSum {
  long double sum = 0;      // Σ p_i summed left to right in long double
  long double sum_abs = 0;  // Σ |p_i|
  std::size_t n = 0;
};

inline NaiveSum naive_sum(const std::vector<double>& products) {
  NaiveSum s;
  for (double p : products) {
    s.sum += static_cast<long double>(p);
    s.sum_abs += std::fabs(static_cast<long double>(p));
  }
  s.n = products.size();
  return s;
}

// Error bound of the contract's fp64 sum against the naive long-double sum.
// Every product is exact (fp64 and long double alike). A sum of n terms in any tree makes
// at most n-1 rounded additions along any path, so for unit roundoff u:
//   |fp64 tree − exact| ≤ γ(n−1)·Σ|p| ≤ (n−1)·2u·Σ|p| = (n−1)·DBL_EPSILON·Σ|p|
//   |long double − exact| ≤ (n−1)·LDBL_EPSILON·Σ|p|
// (γ(k) = k·u/(1−k·u) ≤ 2k·u while k·u ≤ 1/2, true for every size tested here).
inline long double dot_bound(const NaiveSum& s) {
  const long double k = s.n > 0 ? static_cast<long double>(s.n - 1) : 0.0L;
  return k * DBL_EPSILON * s.sum_abs + k * LDBL_EPSILON * s.sum_abs;
}

// The fp32 output adds one rounding to nearest: |fl32(t) − t| ≤ 2^-24·|t| in the normal
// range, and ≤ 2^-150 (half the smallest subnormal step) below it. With |t| ≤ |naive| +
// dot_bound this bounds |y − naive|.
inline long double matvec_bound(const NaiveSum& s) {
  const long double dot = dot_bound(s);
  return std::ldexp(1.0L, -24) * (std::fabs(s.sum) + dot) + std::ldexp(1.0L, -150) + dot;
}

// --- Random inputs --------------------------------------------------------------------

/// fp32 values in ±[2^lo, 2^hi) with random signs and mantissas.
inline std::vector<float> random_floats(std::mt19937_64& rng, std::size_t n, int lo = -4, int hi = 4) {
  std::uniform_real_distribution<double> mantissa(1.0, 2.0);
  std::uniform_int_distribution<int> exponent(lo, hi - 1);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> v(n);
  for (auto& x : v) {
    const double m = std::ldexp(mantissa(rng), exponent(rng));
    x = static_cast<float>(negative(rng) ? -m : m);
  }
  return v;
}

inline std::vector<std::uint16_t> random_bf16(std::mt19937_64& rng, std::size_t n, int lo = -4, int hi = 4) {
  const std::vector<float> f = random_floats(rng, n, lo, hi);
  std::vector<std::uint16_t> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = bf16_bits(f[i]);
  return out;
}

/// Random codes; scales drawn from [scale_lo, scale_hi], with about one group in
/// `zero_group_every` set to 255.
inline Mxfp4Owned random_mxfp4(std::mt19937_64& rng, std::size_t rows, std::size_t cols, int scale_lo = 117,
                               int scale_hi = 137, int zero_group_every = 9) {
  Mxfp4Owned m(rows, cols);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> scale(scale_lo, scale_hi);
  std::uniform_int_distribution<int> zero_pick(0, zero_group_every - 1);
  for (auto& b : m.packed) b = static_cast<std::uint8_t>(byte(rng));
  for (auto& s : m.scales) s = static_cast<std::uint8_t>(zero_pick(rng) == 0 ? 255 : scale(rng));
  return m;
}

/// Bit-level equality for float buffers (so +0/−0 and NaN payloads count).
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

inline std::uint32_t bits_of(float v) { return std::bit_cast<std::uint32_t>(v); }
inline std::uint64_t bits_of(double v) { return std::bit_cast<std::uint64_t>(v); }

}  // namespace k3test
