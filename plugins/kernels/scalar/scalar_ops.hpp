// The scalar kernels: the numerics contract of docs/model-spec.md §4–5 written as plain loops.
//
// This header IS the reference. Every SIMD set (avx2, avx512, neon) reproduces these
// functions bit for bit, and may include this header for the ops or tails it does not
// specialise. Header-only and baseline C++ so it compiles under any target flags.
//
// The one reduction every op uses (sdk/k3/kernels.hpp):
//   - 8 fp64 accumulators, all starting at +0.0;
//   - element i adds its fp64 product into acc[i % 8], in increasing i;
//   - the total is ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7));
//   - a matrix output is that total rounded once to fp32 (round to nearest even).
// Every product below is exact in fp64 (bf16·fp32: 8+24 significant bits; fp32·fp32: 48;
// E2M1·2^k·fp32: 2+24 bits, nonzero magnitudes within [2^-277, 2^259)), so a fused
// multiply-add would round the same as multiply-then-add: only the additions round, in the
// order fixed above.
// Requires the default floating-point environment (no flush-to-zero / denormals-are-zero).
#pragma once
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <k3/kernels.hpp>

namespace k3::kernels::scalar {

/// The contract's 8 accumulators and fixed tree.
class Accumulators {
 public:
  /// Adds the exact product of element `i` into acc[i % 8].
  void add(std::size_t i, double product) noexcept { acc_[i % 8] += product; }

  /// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)), unrounded.
  [[nodiscard]] double total() const noexcept {
    const auto& a = acc_;
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
  }

 private:
  std::array<double, 8> acc_{};  // +0.0 each: an empty or all-zero dot is +0.0
};

/// bf16 -> fp32 is exact: the bf16 bits are the top half of the fp32 bits.
inline float bf16_to_f32(std::uint16_t bits) noexcept {
  const std::uint32_t wide = std::uint32_t{bits} << 16;
  float out;
  std::memcpy(&out, &wide, sizeof out);
  return out;
}

/// E2M1 (fp4) code -> value; codes 8..15 are the negatives of 0..7 (8 is -0).
inline constexpr std::array<double, 16> kE2M1 = {0.0,  0.5,  1.0,  1.5,  2.0,  3.0,  4.0,  6.0,
                                                 -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0};

/// MXFP4 group scale byte -> multiplier 2^(s-127). 255 (NaN in the OCP spec) makes every
/// weight of its group zero: the group's products are ±0 and leave the sums unchanged.
inline double mxfp4_scale(std::uint8_t s) noexcept {
  return s == 255 ? 0.0 : std::ldexp(1.0, int{s} - 127);
}

/// Code of column c in a packed row: the low nibble holds the even column.
inline unsigned mxfp4_code(const std::uint8_t* packed_row, std::size_t c) noexcept {
  return (packed_row[c / 2] >> (4 * (c % 2))) & 0xFu;
}

/// Bytes per packed row and scales per row for `cols` columns (odd counts round up).
inline std::size_t mxfp4_packed_stride(std::size_t cols) noexcept { return (cols + 1) / 2; }
inline std::size_t mxfp4_scale_stride(std::size_t cols) noexcept { return (cols + 31) / 32; }

// dot_f32(a, b, n): fp32 a[i] and b[i] widened to fp64; product a[i]·b[i] (exact) into
// acc[i % 8] in increasing i; returns the tree total unrounded (fp64).
inline double dot_f32(const float* a, const float* b, std::size_t n) noexcept {
  Accumulators acc;
  for (std::size_t i = 0; i < n; ++i) acc.add(i, double{a[i]} * double{b[i]});
  return acc.total();
}

// Row dot of a bf16 weight row with fp32 x: w[c] -> fp32 (exact, bits << 16) -> fp64;
// x[c] -> fp64; product (exact) into acc[c % 8] in increasing c; tree total rounded once
// to fp32.
inline float row_dot_bf16(const std::uint16_t* w_row, const float* x, std::size_t cols) noexcept {
  Accumulators acc;
  for (std::size_t c = 0; c < cols; ++c) acc.add(c, double{bf16_to_f32(w_row[c])} * double{x[c]});
  return static_cast<float>(acc.total());
}

// Row dot of an fp32 weight row with fp32 x: both widened to fp64; product (exact) into
// acc[c % 8] in increasing c; tree total rounded once to fp32.
inline float row_dot_f32(const float* w_row, const float* x, std::size_t cols) noexcept {
  Accumulators acc;
  for (std::size_t c = 0; c < cols; ++c) acc.add(c, double{w_row[c]} * double{x[c]});
  return static_cast<float>(acc.total());
}

// Row dot of an MXFP4 weight row with fp32 x, straight from the packed nibbles:
// weight = E2M1[code(c)] · 2^(scale[c/32] − 127) in fp64 (exact; scale 255 gives 0);
// x[c] -> fp64; product (exact) into acc[c % 8] in increasing c; tree total rounded once
// to fp32. `cols` may be odd and need not be a multiple of 32: the last byte's high nibble
// and the last group's missing columns are never read.
inline float row_dot_mxfp4(const std::uint8_t* packed_row, const std::uint8_t* scale_row, const float* x,
                           std::size_t cols) noexcept {
  Accumulators acc;
  for (std::size_t c = 0; c < cols; ++c) {
    const double weight = kE2M1[mxfp4_code(packed_row, c)] * mxfp4_scale(scale_row[c / 32]);
    acc.add(c, weight * double{x[c]});
  }
  return static_cast<float>(acc.total());
}

/// Rows of `range` that exist in a matrix of `rows` rows (an out-of-bounds end is clipped).
inline sdk::RowRange clip(sdk::RowRange range, std::size_t rows) noexcept {
  const std::size_t end = range.end < rows ? range.end : rows;
  return {range.begin < end ? range.begin : end, end};
}

// Matmuls: Y[b, r] = row_dot(W[r], X[b]) for every batch row b and every r in the range.
// Batch rows are independent: each equals the batch-1 result bit for bit.

inline void matmul_bf16(const std::uint16_t* w, std::size_t rows, std::size_t cols, sdk::RowRange range,
                        const float* x, std::size_t batch, float* y) noexcept {
  const sdk::RowRange r_range = clip(range, rows);
  for (std::size_t r = r_range.begin; r < r_range.end; ++r)
    for (std::size_t b = 0; b < batch; ++b) y[b * rows + r] = row_dot_bf16(w + r * cols, x + b * cols, cols);
}

inline void matmul_f32(const float* w, std::size_t rows, std::size_t cols, sdk::RowRange range, const float* x,
                       std::size_t batch, float* y) noexcept {
  const sdk::RowRange r_range = clip(range, rows);
  for (std::size_t r = r_range.begin; r < r_range.end; ++r)
    for (std::size_t b = 0; b < batch; ++b) y[b * rows + r] = row_dot_f32(w + r * cols, x + b * cols, cols);
}

inline void matmul_mxfp4(const sdk::Mxfp4Matrix& w, sdk::RowRange range, const float* x, std::size_t batch,
                         float* y) noexcept {
  const sdk::RowRange r_range = clip(range, w.rows);
  const std::size_t packed_stride = mxfp4_packed_stride(w.cols);
  const std::size_t scale_stride = mxfp4_scale_stride(w.cols);
  for (std::size_t r = r_range.begin; r < r_range.end; ++r) {
    const std::uint8_t* packed_row = w.packed + r * packed_stride;
    const std::uint8_t* scale_row = w.scales + r * scale_stride;
    for (std::size_t b = 0; b < batch; ++b)
      y[b * w.rows + r] = row_dot_mxfp4(packed_row, scale_row, x + b * w.cols, w.cols);
  }
}

}  // namespace k3::kernels::scalar
