// NEON kernels (AArch64 Advanced SIMD, fp64 lanes).
//
// Same partition and tree as the scalar set, lane for lane:
//   Four float64x2 per output hold the contract's accumulators: a01 = (acc0, acc1),
//   a23 = (acc2, acc3), a45 = (acc4, acc5), a67 = (acc6, acc7). In each block of 8 elements
//   (increasing i), element i adds its exact fp64 product into acc[i % 8] with vfmaq_f64,
//   which rounds exactly like the scalar's add because every product is exact in fp64.
//   Tree (reduce_tree): b01 = a01 + a45 = (a0+a4, a1+a5); b23 = a23 + a67 = (a2+a6, a3+a7);
//   c = b01 + b23 = ((a0+a4)+(a2+a6), (a1+a5)+(a3+a7)); result c[0] + c[1].
//   A row's last cols % 8 elements are copied into zero-padded blocks: a padded lane adds
//   0·0 = +0, which leaves its accumulator unchanged (an accumulator that starts at +0 can
//   never become -0, and +0 added to any other value, inf or NaN returns it unchanged).
// Batch 1: several rows run at once to hide the FMA latency; a row's own additions are never
// reordered. Batch > 1: a tile of rows x positions (common/position_tiles.hpp): each block of
// 8 weights is widened or decoded once and multiplied into every position of the tile, with
// the activations widened to fp64 once per call; each (row, position) accumulator still
// takes its additions in the batch-1 order. Positions loop inside a row tile.
#include <arm_neon.h>

#include <cstring>

#include "../common/position_tiles.hpp"
#include "neon_ops.hpp"

namespace k3::kernels::neon {
namespace {

using sdk::Mxfp4Matrix;
using sdk::RowRange;

constexpr std::size_t kRowTile = 4;  // batch 1: rows at once
// Batch > 1: kPosRowTile rows x kPosTile positions, 4 q registers per (row, position): 16
// accumulators, a block of weights and one position's activations within the 32 q
// registers; batch 8 is two whole tiles. Chosen by register count (qemu cannot time it).
constexpr std::size_t kPosRowTile = 1;
constexpr std::size_t kPosTile = 4;
constexpr std::size_t kMxfp4Group = 32;

inline RowRange clip(RowRange range, std::size_t rows) {
  const std::size_t end = range.end < rows ? range.end : rows;
  return {range.begin < end ? range.begin : end, end};
}

struct Acc {
  float64x2_t a01 = vdupq_n_f64(0.0);
  float64x2_t a23 = vdupq_n_f64(0.0);
  float64x2_t a45 = vdupq_n_f64(0.0);
  float64x2_t a67 = vdupq_n_f64(0.0);
};

/// 8 consecutive values as exact doubles, split like Acc.
struct Block {
  float64x2_t v01;
  float64x2_t v23;
  float64x2_t v45;
  float64x2_t v67;
};

inline void fma_block(Acc& a, const Block& w, const Block& x) {
  a.a01 = vfmaq_f64(a.a01, w.v01, x.v01);
  a.a23 = vfmaq_f64(a.a23, w.v23, x.v23);
  a.a45 = vfmaq_f64(a.a45, w.v45, x.v45);
  a.a67 = vfmaq_f64(a.a67, w.v67, x.v67);
}

/// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
inline double reduce_tree(const Acc& a) {
  const float64x2_t c = vaddq_f64(vaddq_f64(a.a01, a.a45), vaddq_f64(a.a23, a.a67));
  return vgetq_lane_f64(c, 0) + vgetq_lane_f64(c, 1);
}

inline Block widen(float32x4_t lo, float32x4_t hi) {
  return {vcvt_f64_f32(vget_low_f32(lo)), vcvt_high_f64_f32(lo), vcvt_f64_f32(vget_low_f32(hi)),
          vcvt_high_f64_f32(hi)};
}

inline Block load_f32x8(const float* p) { return widen(vld1q_f32(p), vld1q_f32(p + 4)); }

template <class T>
inline void copy_tail(const T* p, std::size_t k, T (&out)[8]) {
  for (std::size_t i = 0; i < 8; ++i) out[i] = T{};
  std::memcpy(out, p, k * sizeof(T));
}

struct Bf16Weights {
  using T = std::uint16_t;
  static Block load8(const T* p) {
    const uint16x8_t raw = vld1q_u16(p);
    // Widening shift left by 16 gives each bf16's fp32 bits.
    return widen(vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(raw), 16)),
                 vreinterpretq_f32_u32(vshll_high_n_u16(raw, 16)));
  }
};

struct F32Weights {
  using T = float;
  static Block load8(const T* p) { return load_f32x8(p); }
};

template <class W, std::size_t R>
inline void dense_rows(const typename W::T* w, std::size_t cols, const float* x, float* y) {
  Acc acc[R];
  std::size_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    const Block xv = load_f32x8(x + c);
    for (std::size_t r = 0; r < R; ++r) fma_block(acc[r], W::load8(w + r * cols + c), xv);
  }
  if (c < cols) {
    const std::size_t k = cols - c;
    float xt[8];
    copy_tail(x + c, k, xt);
    const Block xv = load_f32x8(xt);
    for (std::size_t r = 0; r < R; ++r) {
      typename W::T wt[8];
      copy_tail(w + r * cols + c, k, wt);
      fma_block(acc[r], W::load8(wt), xv);
    }
  }
  for (std::size_t r = 0; r < R; ++r) y[r] = static_cast<float>(reduce_tree(acc[r]));
}

/// Batch-1 kernel over positions [p, p + n).
template <class W>
void dense_each_position(const typename W::T* w, std::size_t rows, std::size_t cols, RowRange rr, const float* x,
                         std::size_t p, std::size_t n, float* y) {
  for (std::size_t b = p; b < p + n; ++b) {
    std::size_t r = rr.begin;
    for (; r + kRowTile <= rr.end; r += kRowTile)
      dense_rows<W, kRowTile>(w + r * cols, cols, x + b * cols, y + b * rows + r);
    for (; r < rr.end; ++r) dense_rows<W, 1>(w + r * cols, cols, x + b * cols, y + b * rows + r);
  }
}

/// 8 widened activations (one panel block) as a Block.
inline Block load_f64x8(const double* p) {
  return {vld1q_f64(p), vld1q_f64(p + 2), vld1q_f64(p + 4), vld1q_f64(p + 6)};
}

/// Rows [0, R) of w x the B positions of panel `xp` (position_tiles.hpp): each block of 8
/// weights of a row is widened once and multiplied into the B positions' accumulators;
/// y[b * ys + r] gets (row r, position b).
template <class W, std::size_t R, std::size_t B>
inline void dense_tile(const typename W::T* w, std::size_t cols, const double* xp, float* y, std::size_t ys) {
  Acc acc[R][B];
  const auto block = [&](const Block (&wv)[R], std::size_t k) {
    for (std::size_t b = 0; b < B; ++b) {
      const Block xv = load_f64x8(panel_block<B>(xp, k, b));
      for (std::size_t r = 0; r < R; ++r) fma_block(acc[r][b], wv[r], xv);
    }
  };
  std::size_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    Block wv[R];
    for (std::size_t r = 0; r < R; ++r) wv[r] = W::load8(w + r * cols + c);
    block(wv, c / 8);
  }
  if (c < cols) {  // the weights copied into a zero-padded block; the panel is padded already
    Block wv[R];
    for (std::size_t r = 0; r < R; ++r) {
      typename W::T wt[8];
      copy_tail(w + r * cols + c, cols - c, wt);
      wv[r] = W::load8(wt);
    }
    block(wv, c / 8);
  }
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t b = 0; b < B; ++b) y[b * ys + r] = static_cast<float>(reduce_tree(acc[r][b]));
}

template <class W>
void matmul_dense(const typename W::T* w, std::size_t rows, std::size_t cols, RowRange range, const float* x,
                  std::size_t batch, float* y) noexcept {
  const RowRange rr = clip(range, rows);
  if (rr.begin == rr.end) return;
  if (batch == 1) return dense_each_position<W>(w, rows, cols, rr, x, 0, 1, y);
  const std::size_t xs = round_up(cols, 8);
  over_widened_positions(
      x, batch, cols, xs, kPosTile,
      [&](const double* xw, std::size_t p0, std::size_t n) {
        for_each_tile<kPosRowTile, kPosTile>(
            rr.begin, rr.end, n, [&]<std::size_t R, std::size_t B>(std::size_t r, std::size_t p) {
              dense_tile<W, R, B>(w + r * cols, cols, xw + p * xs, y + (p0 + p) * rows + r, rows);
            });
      },
      [&](std::size_t p0, std::size_t n) { dense_each_position<W>(w, rows, cols, rr, x, p0, n, y); });
}

void matmul_bf16(const std::uint16_t* w, std::size_t rows, std::size_t cols, RowRange range, const float* x,
                 std::size_t batch, float* y) noexcept {
  matmul_dense<Bf16Weights>(w, rows, cols, range, x, batch, y);
}

void matmul_f32(const float* w, std::size_t rows, std::size_t cols, RowRange range, const float* x,
                std::size_t batch, float* y) noexcept {
  matmul_dense<F32Weights>(w, rows, cols, range, x, batch, y);
}

double dot_f32(const float* a, const float* b, std::size_t n) noexcept {
  Acc acc;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) fma_block(acc, load_f32x8(a + i), load_f32x8(b + i));
  if (i < n) {
    float at[8];
    float bt[8];
    copy_tail(a + i, n - i, at);
    copy_tail(b + i, n - i, bt);
    fma_block(acc, load_f32x8(at), load_f32x8(bt));
  }
  return reduce_tree(acc);
}

// MXFP4. Per (row, group) the 16 possible weights E2M1[code]·2^(s-127) are built exactly in
// fp64 (scale byte 255 gives ±0 weights, as in the scalar set); each element's weight is
// then picked by its code (low nibble = even column) and the block goes through fma_block.
constexpr double kE2M1[16] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0};

/// The group multiplier: 2^(s-127) from its bits (a normal double for s <= 254), 0 for 255.
inline double group_scale(unsigned s) {
  const std::uint64_t bits = s == 255 ? 0 : static_cast<std::uint64_t>(s + 896u) << 52;
  double d = 0;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

/// The 32 weights of one row's group (16 bytes at p, scale byte s), as 4 blocks.
inline void mxfp4_decode_group(const std::uint8_t* p, unsigned s, Block (&out)[4]) {
  const float64x2_t scale = vdupq_n_f64(group_scale(s));
  alignas(16) double table[16];
  for (std::size_t c = 0; c < 16; c += 2) vst1q_f64(table + c, vmulq_f64(vld1q_f64(kE2M1 + c), scale));
  for (std::size_t j = 0; j < 4; ++j) {
    alignas(16) double w[8];
    for (std::size_t e = 0; e < 4; ++e) {
      const std::uint8_t byte = p[4 * j + e];
      w[2 * e] = table[byte & 0x0F];
      w[2 * e + 1] = table[byte >> 4];
    }
    out[j] = {vld1q_f64(w), vld1q_f64(w + 2), vld1q_f64(w + 4), vld1q_f64(w + 6)};
  }
}

/// One row's 32-element group (16 bytes at p, activations xg[0..3]) into acc.
inline void mxfp4_group(const std::uint8_t* p, unsigned s, const Block* xg, Acc& acc) {
  Block w[4];
  mxfp4_decode_group(p, s, w);
  for (std::size_t j = 0; j < 4; ++j) fma_block(acc, w[j], xg[j]);
}

template <std::size_t R>
inline void mxfp4_rows(const Mxfp4Matrix& m, std::size_t r0, const float* x, float* y) {
  const std::size_t cols = m.cols;
  const std::size_t pstride = (cols + 1) / 2;
  const std::size_t sstride = (cols + kMxfp4Group - 1) / kMxfp4Group;
  const std::uint8_t* packed = m.packed + r0 * pstride;
  const std::uint8_t* scales = m.scales + r0 * sstride;
  Acc acc[R];

  const std::size_t full_groups = cols / kMxfp4Group;
  for (std::size_t g = 0; g < full_groups; ++g) {
    const float* xg = x + g * kMxfp4Group;
    const Block xv[4] = {load_f32x8(xg), load_f32x8(xg + 8), load_f32x8(xg + 16), load_f32x8(xg + 24)};
    for (std::size_t r = 0; r < R; ++r)
      mxfp4_group(packed + r * pstride + g * (kMxfp4Group / 2), scales[r * sstride + g], xv, acc[r]);
  }

  // A last, partial group: bytes and activations are copied into a zero-padded group, so
  // nothing past the row is read and every padded element is code 0 (+0) times +0; for odd
  // cols the unused high nibble of the last byte is cleared.
  const std::size_t rem = cols - full_groups * kMxfp4Group;
  if (rem != 0) {
    const std::size_t g = full_groups;
    float xt[kMxfp4Group] = {};
    std::memcpy(xt, x + g * kMxfp4Group, rem * sizeof(float));
    const Block xv[4] = {load_f32x8(xt), load_f32x8(xt + 8), load_f32x8(xt + 16), load_f32x8(xt + 24)};
    for (std::size_t r = 0; r < R; ++r) {
      std::uint8_t bytes[kMxfp4Group / 2] = {};
      std::memcpy(bytes, packed + r * pstride + g * (kMxfp4Group / 2), (rem + 1) / 2);
      if (rem % 2 != 0) bytes[rem / 2] &= 0x0F;
      mxfp4_group(bytes, scales[r * sstride + g], xv, acc[r]);
    }
  }
  for (std::size_t r = 0; r < R; ++r) y[r] = static_cast<float>(reduce_tree(acc[r]));
}

/// Batch-1 kernel over positions [p, p + n).
void mxfp4_each_position(const Mxfp4Matrix& m, RowRange rr, const float* x, std::size_t p, std::size_t n, float* y) {
  for (std::size_t b = p; b < p + n; ++b) {
    std::size_t r = rr.begin;
    for (; r + kRowTile <= rr.end; r += kRowTile) mxfp4_rows<kRowTile>(m, r, x + b * m.cols, y + b * m.rows + r);
    for (; r < rr.end; ++r) mxfp4_rows<1>(m, r, x + b * m.cols, y + b * m.rows + r);
  }
}

/// Rows [r0, r0 + R) x the B positions of panel `xp` (position_tiles.hpp): each group of a
/// row is decoded once and multiplied into the B positions' accumulators; y[b * ys + r]
/// gets (row r0 + r, position b).
template <std::size_t R, std::size_t B>
inline void mxfp4_pos_tile(const Mxfp4Matrix& m, std::size_t r0, const double* xp, float* y, std::size_t ys) {
  const std::size_t cols = m.cols;
  const std::size_t pstride = (cols + 1) / 2;
  const std::size_t sstride = (cols + kMxfp4Group - 1) / kMxfp4Group;
  const std::uint8_t* packed = m.packed + r0 * pstride;
  const std::uint8_t* scales = m.scales + r0 * sstride;
  constexpr std::size_t kGroupBytes = kMxfp4Group / 2;
  Acc acc[R][B];
  const auto group = [&](const std::uint8_t* p, unsigned s, std::size_t g, Acc (&a)[B]) {
    Block w[4];
    mxfp4_decode_group(p, s, w);
    for (std::size_t j = 0; j < 4; ++j)
      for (std::size_t b = 0; b < B; ++b) fma_block(a[b], w[j], load_f64x8(panel_block<B>(xp, 4 * g + j, b)));
  };
  const std::size_t full_groups = cols / kMxfp4Group;
  for (std::size_t g = 0; g < full_groups; ++g)
    for (std::size_t r = 0; r < R; ++r)
      group(packed + r * pstride + g * kGroupBytes, scales[r * sstride + g], g, acc[r]);
  // A last, partial group: its bytes copied into a zero-padded group (the unused high
  // nibble of an odd last column cleared), so its padding is code 0 (+0) times the panel's +0.
  const std::size_t rem = cols - full_groups * kMxfp4Group;
  if (rem != 0) {
    const std::size_t g = full_groups;
    for (std::size_t r = 0; r < R; ++r) {
      std::uint8_t bytes[kGroupBytes] = {};
      std::memcpy(bytes, packed + r * pstride + g * kGroupBytes, (rem + 1) / 2);
      if (rem % 2 != 0) bytes[rem / 2] &= 0x0F;
      group(bytes, scales[r * sstride + g], g, acc[r]);
    }
  }
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t b = 0; b < B; ++b) y[b * ys + r] = static_cast<float>(reduce_tree(acc[r][b]));
}

void matmul_mxfp4(const Mxfp4Matrix& m, RowRange range, const float* x, std::size_t batch, float* y) noexcept {
  const RowRange rr = clip(range, m.rows);
  if (rr.begin == rr.end) return;
  if (batch == 1) return mxfp4_each_position(m, rr, x, 0, 1, y);
  const std::size_t xs = round_up(m.cols, kMxfp4Group);
  over_widened_positions(
      x, batch, m.cols, xs, kPosTile,
      [&](const double* xw, std::size_t p0, std::size_t n) {
        for_each_tile<kPosRowTile, kPosTile>(
            rr.begin, rr.end, n, [&]<std::size_t R, std::size_t B>(std::size_t r, std::size_t p) {
              mxfp4_pos_tile<R, B>(m, r, xw + p * xs, y + (p0 + p) * m.rows + r, m.rows);
            });
      },
      [&](std::size_t p0, std::size_t n) { mxfp4_each_position(m, rr, x, p0, n, y); });
}

}  // namespace

const Ops ops = {matmul_bf16, matmul_f32, matmul_mxfp4, dot_f32};

}  // namespace k3::kernels::neon
