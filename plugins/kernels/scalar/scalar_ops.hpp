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
inline double mxfp4_scale(std::uint8_t s) noexcept { return s == 255 ? 0.0 : std::ldexp(1.0, int{s} - 127); }

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

/// Positions (batch rows) a matmul runs side by side, so each weight is decoded once for
/// all of them.
inline constexpr std::size_t kPositionTile = 8;

// Row dots of one weight row with n <= kPositionTile positions of fp32 x ([n, cols]): column
// c's weight, weight_at(c), is an exact fp64 value computed once; for each position b, x[b, c]
// -> fp64, product (exact) into that position's acc[c % 8] in increasing c; each tree total
// rounded once to fp32 into y[b * y_stride]. Positions never share an accumulator, so each
// result is the same as with n = 1.
template <class WeightAt>
inline void row_dots(const WeightAt& weight_at, const float* x, std::size_t cols, std::size_t n, float* y,
                     std::size_t y_stride) noexcept {
  std::array<Accumulators, kPositionTile> acc{};
  for (std::size_t c = 0; c < cols; ++c) {
    const double weight = weight_at(c);
    for (std::size_t b = 0; b < n; ++b) acc[b].add(c, weight * double{x[b * cols + c]});
  }
  for (std::size_t b = 0; b < n; ++b) y[b * y_stride] = static_cast<float>(acc[b].total());
}

// The weights of a row as exact fp64 values, by column.

/// bf16: -> fp32 (exact, bits << 16) -> fp64.
struct Bf16Row {
  const std::uint16_t* w;
  double operator()(std::size_t c) const noexcept { return double{bf16_to_f32(w[c])}; }
};

/// fp32: -> fp64.
struct F32Row {
  const float* w;
  double operator()(std::size_t c) const noexcept { return double{w[c]}; }
};

/// MXFP4, straight from the packed nibbles: E2M1[code(c)] · 2^(scale[c/32] − 127) in fp64
/// (exact; scale 255 gives 0). `cols` may be odd and need not be a multiple of 32: the last
/// byte's high nibble and the last group's missing columns are never read.
struct Mxfp4Row {
  const std::uint8_t* packed;
  const std::uint8_t* scales;
  double operator()(std::size_t c) const noexcept { return kE2M1[mxfp4_code(packed, c)] * mxfp4_scale(scales[c / 32]); }
};

/// One row's dot with one position: row_dots with n = 1.
template <class WeightAt>
inline float row_dot(const WeightAt& weight_at, const float* x, std::size_t cols) noexcept {
  float y = 0.0f;
  row_dots(weight_at, x, cols, 1, &y, 1);
  return y;
}

inline float row_dot_bf16(const std::uint16_t* w_row, const float* x, std::size_t cols) noexcept {
  return row_dot(Bf16Row{w_row}, x, cols);
}
inline float row_dot_f32(const float* w_row, const float* x, std::size_t cols) noexcept {
  return row_dot(F32Row{w_row}, x, cols);
}
inline float row_dot_mxfp4(const std::uint8_t* packed_row, const std::uint8_t* scale_row, const float* x,
                           std::size_t cols) noexcept {
  return row_dot(Mxfp4Row{packed_row, scale_row}, x, cols);
}

/// Rows of `range` that exist in a matrix of `rows` rows (an out-of-bounds end is clipped).
inline sdk::RowRange clip(sdk::RowRange range, std::size_t rows) noexcept {
  const std::size_t end = range.end < rows ? range.end : rows;
  return {range.begin < end ? range.begin : end, end};
}

// Matmuls: Y[b, r] = row_dot(W[r], X[b]) for every batch row b and every r in the range,
// kPositionTile batch rows at a time. Batch rows are independent: each equals the batch-1
// result bit for bit.

/// Row r's weights (make_row(r)) against every batch row, kPositionTile at a time.
template <class MakeRow>
inline void matmul_rows(const MakeRow& make_row, std::size_t rows, std::size_t cols, sdk::RowRange range,
                        const float* x, std::size_t batch, float* y) noexcept {
  const sdk::RowRange r_range = clip(range, rows);
  for (std::size_t r = r_range.begin; r < r_range.end; ++r) {
    const auto weight_at = make_row(r);
    for (std::size_t b = 0; b < batch; b += kPositionTile) {
      const std::size_t n = batch - b < kPositionTile ? batch - b : kPositionTile;
      row_dots(weight_at, x + b * cols, cols, n, y + b * rows + r, rows);
    }
  }
}

inline void matmul_bf16(const std::uint16_t* w, std::size_t rows, std::size_t cols, sdk::RowRange range, const float* x,
                        std::size_t batch, float* y) noexcept {
  matmul_rows([&](std::size_t r) { return Bf16Row{w + r * cols}; }, rows, cols, range, x, batch, y);
}

inline void matmul_f32(const float* w, std::size_t rows, std::size_t cols, sdk::RowRange range, const float* x,
                       std::size_t batch, float* y) noexcept {
  matmul_rows([&](std::size_t r) { return F32Row{w + r * cols}; }, rows, cols, range, x, batch, y);
}

inline void matmul_mxfp4(const sdk::Mxfp4Matrix& w, sdk::RowRange range, const float* x, std::size_t batch,
                         float* y) noexcept {
  const std::size_t packed_stride = mxfp4_packed_stride(w.cols);
  const std::size_t scale_stride = mxfp4_scale_stride(w.cols);
  matmul_rows(
      [&](std::size_t r) {
    return Mxfp4Row{w.packed + r * packed_stride, w.scales + r * scale_stride};
      },
      w.rows, w.cols, range, x, batch, y);
}

}  // namespace k3::kernels::scalar
