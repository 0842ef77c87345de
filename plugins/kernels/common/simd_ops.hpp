// The four ops of a SIMD kernel set, written once for avx2, avx512 and neon: the row range,
// batch 1 against batch > 1, the activations widened for the position tiles, dot_f32 and
// the op table. A set supplies only its ISA-specific code, as the struct `Isa` this is
// instantiated with:
//
//   Isa::Bf16Weights, Isa::F32Weights   weight loaders (W::T, the stored type)
//   Isa::dense_each_position<W>(w, rows, cols, rr, x, p, n, y)
//       the batch-1 kernel over positions [p, p + n); it also takes the positions whose
//       activations cannot be widened (over_widened_positions, position_tiles.hpp)
//   Isa::dense_panel(batch)
//       positions per panel of widened activations for a call of `batch` positions
//   Isa::dense_positions<W>(w, rows, cols, rr, x, batch, xw, xs, p, n, y)
//       batch > 1: positions [p, p + n), their activations widened into panels at xw
//       (position rows xs doubles apart)
//   Isa::mxfp4_each_position, Isa::mxfp4_panel, Isa::mxfp4_positions   the same for MXFP4
//   Isa::Acc, Isa::dot_block(acc, a, b), Isa::dot_tail(acc, a, b, k), Isa::reduce_tree(acc)
//       dot_f32: 8 elements into the contract's accumulators, the last k < 8, the tree
//
// Only the set's ISA-flagged translation unit includes this, and declares its Isa in an
// unnamed namespace, so no instantiation is shared with code built for another ISA.
#pragma once
#include <cstddef>
#include <cstdint>

#include <k3/kernels.hpp>

#include "mxfp4_groups.hpp"
#include "op_table.hpp"
#include "position_tiles.hpp"

namespace k3::kernels {

/// The rows of `range` that exist in a matrix of `rows` rows (an end past it is clipped,
/// as in the scalar set).
inline sdk::RowRange clip_rows(sdk::RowRange range, std::size_t rows) noexcept {
  const std::size_t end = range.end < rows ? range.end : rows;
  return {range.begin < end ? range.begin : end, end};
}

// The ops are defined out of the class: a member function defined in it is implicitly
// inline, and GCC's inliner treats that as a hint. Out of it they are inlined (or not) as
// any function template is, as when each set wrote them itself (their code was measured so).
template <class Isa>
struct SimdOps {
  template <class W>
  static void matmul_dense(const typename W::T* w, std::size_t rows, std::size_t cols, sdk::RowRange range,
                           const float* x, std::size_t batch, float* y) noexcept;
  static void matmul_bf16(const std::uint16_t* w, std::size_t rows, std::size_t cols, sdk::RowRange range,
                          const float* x, std::size_t batch, float* y) noexcept;
  static void matmul_f32(const float* w, std::size_t rows, std::size_t cols, sdk::RowRange range, const float* x,
                         std::size_t batch, float* y) noexcept;
  static void matmul_mxfp4(const sdk::Mxfp4Matrix& m, sdk::RowRange range, const float* x, std::size_t batch,
                           float* y) noexcept;
  static double dot_f32(const float* a, const float* b, std::size_t n) noexcept;

  /// The set's op table, for its constant-initialised definition.
  static constexpr OpTable table{matmul_bf16, matmul_f32, matmul_mxfp4, dot_f32};
};

template <class Isa>
template <class W>
void SimdOps<Isa>::matmul_dense(const typename W::T* w, std::size_t rows, std::size_t cols, sdk::RowRange range,
                                const float* x, std::size_t batch, float* y) noexcept {
  const sdk::RowRange rr = clip_rows(range, rows);
  if (rr.begin == rr.end) return;
  if (batch == 1) return Isa::template dense_each_position<W>(w, rows, cols, rr, x, 0, 1, y);
  const std::size_t xs = round_up(cols, 8);
  over_widened_positions(
      x, batch, cols, xs, Isa::dense_panel(batch),
      [&](const double* xw, std::size_t p, std::size_t n) {
    Isa::template dense_positions<W>(w, rows, cols, rr, x, batch, xw, xs, p, n, y);
      },
      [&](std::size_t p, std::size_t n) { Isa::template dense_each_position<W>(w, rows, cols, rr, x, p, n, y); });
}

template <class Isa>
void SimdOps<Isa>::matmul_bf16(const std::uint16_t* w, std::size_t rows, std::size_t cols, sdk::RowRange range,
                               const float* x, std::size_t batch, float* y) noexcept {
  matmul_dense<typename Isa::Bf16Weights>(w, rows, cols, range, x, batch, y);
}

template <class Isa>
void SimdOps<Isa>::matmul_f32(const float* w, std::size_t rows, std::size_t cols, sdk::RowRange range, const float* x,
                              std::size_t batch, float* y) noexcept {
  matmul_dense<typename Isa::F32Weights>(w, rows, cols, range, x, batch, y);
}

template <class Isa>
void SimdOps<Isa>::matmul_mxfp4(const sdk::Mxfp4Matrix& m, sdk::RowRange range, const float* x, std::size_t batch,
                                float* y) noexcept {
  const sdk::RowRange rr = clip_rows(range, m.rows);
  if (rr.begin == rr.end) return;
  if (batch == 1) return Isa::mxfp4_each_position(m, rr, x, 0, 1, y);
  const std::size_t xs = round_up(m.cols, kMxfp4Group);
  over_widened_positions(
      x, batch, m.cols, xs, Isa::mxfp4_panel(batch),
      [&](const double* xw, std::size_t p, std::size_t n) { Isa::mxfp4_positions(m, rr, x, batch, xw, xs, p, n, y); },
      [&](std::size_t p, std::size_t n) { Isa::mxfp4_each_position(m, rr, x, p, n, y); });
}

template <class Isa>
double SimdOps<Isa>::dot_f32(const float* a, const float* b, std::size_t n) noexcept {
  typename Isa::Acc acc{};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) Isa::dot_block(acc, a + i, b + i);
  if (i < n) Isa::dot_tail(acc, a + i, b + i, n - i);
  return Isa::reduce_tree(acc);
}

}  // namespace k3::kernels
