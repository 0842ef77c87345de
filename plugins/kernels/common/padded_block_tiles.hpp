// The tiles of a SIMD set whose vectors hold 8 doubles as a `Block` and whose row tails are
// zero-padded blocks (avx2, neon), written once over the set's lanes `L`. What is left to
// each set is ISA-specific: how a Block is held, loaded, widened and decoded, the FMA and
// the tree.
//
// Same partition and tree as the scalar set, lane for lane: in each block of 8 elements
// (increasing i), element i adds its exact fp64 product into lane i % 8 of the output's
// Acc (the contract's acc[i % 8]); L::reduce_tree adds them up in the contract's tree. A
// row's last cols % 8 elements are copied into zero-padded blocks: a padded lane adds
// 0·0 = +0, which leaves its accumulator unchanged (an accumulator that starts at +0 can
// never become -0, and +0 added to any other value, inf or NaN returns it unchanged).
//
// Batch 1: L::kRowTile rows run at once (independent accumulators) to hide the FMA
// latency; the additions within one row are never reordered. Batch > 1: register tiles of
// rows x positions (position_tiles.hpp): each block of 8 weights is widened or decoded once
// per tile and multiplied into every position of it, with the activations widened to fp64
// once per call; each (row, position) accumulator still takes its additions in the batch-1
// order. Tiles prefetch ahead in their rows and into the next tile's (row_prefetch.hpp says
// why), MXFP4 tiles also the next tile's scale bytes, through L's prefetch hooks (no-ops
// where a set has none).
//
// L supplies:
//   Acc (all lanes +0 when default-constructed), Block, fma_block(acc, w, x), reduce_tree(acc),
//   load_f32x8(const float*), load_f64x8(const double*)
//   Bf16Weights, F32Weights: T and load8(const T*), 8 weights as exact doubles
//   Mxfp4Table, mxfp4_table(scale byte): what decoding a group's weights needs;
//   mxfp4_decode8(four bytes, table): their 8 weights (low nibble = even column)
//   prefetch_row<R>(tile, stride, offset, r) (row_prefetch.hpp), prefetch(address)
//   kRowTile (batch-1 rows at once), kDenseRows x kDensePositions and kMxfp4Rows x
//   kMxfp4Positions (the register tiles)
// and the struct answers SimdOps' (simd_ops.hpp) questions with register tiles alone; a set
// may derive from it to answer batch > 1 otherwise (avx2).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <k3/kernels.hpp>

#include "mxfp4_groups.hpp"
#include "position_tiles.hpp"
#include "row_prefetch.hpp"
#include "widened_activations.hpp"

namespace k3::kernels {

template <class L>
struct PaddedBlockTiles {
  using Acc = typename L::Acc;
  using Block = typename L::Block;
  using Bf16Weights = typename L::Bf16Weights;
  using F32Weights = typename L::F32Weights;
  using RowRange = sdk::RowRange;
  using Mxfp4Matrix = sdk::Mxfp4Matrix;

  static double reduce_tree(const Acc& a) { return L::reduce_tree(a); }

  /// The first k (< 8) values at p, zero-padded to a block, without reading past p + k.
  template <class T>
  static void copy_tail(const T* p, std::size_t k, T (&out)[8]) {
    for (std::size_t i = 0; i < 8; ++i) out[i] = T{};
    std::memcpy(out, p, k * sizeof(T));
  }

  // dot_f32 (SimdOps): 8 elements, and the last k < 8 as one zero-padded block.
  static void dot_block(Acc& acc, const float* a, const float* b) {
    L::fma_block(acc, L::load_f32x8(a), L::load_f32x8(b));
  }
  static void dot_tail(Acc& acc, const float* a, const float* b, std::size_t k) {
    float at[8];
    float bt[8];
    copy_tail(a, k, at);
    copy_tail(b, k, bt);
    L::fma_block(acc, L::load_f32x8(at), L::load_f32x8(bt));
  }

  /// y[r] = row r of w · x for the R rows starting at w (row stride cols).
  template <class W, std::size_t R>
  static void dense_rows(const typename W::T* w, std::size_t cols, const float* x, float* y) {
    constexpr std::size_t kLineElems = kCacheLine / sizeof(typename W::T);
    const std::size_t stride = cols * sizeof(typename W::T);
    Acc acc[R];
    std::size_t c = 0;
    for (; c + 8 <= cols; c += 8) {
      if (c % kLineElems == 0) {  // ahead in this tile's rows and into the next tile's
#pragma GCC unroll 8
        for (std::size_t r = 0; r < R; ++r) L::template prefetch_row<R>(w, stride, c * sizeof(typename W::T), r);
      }
      const Block xv = L::load_f32x8(x + c);
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r) L::fma_block(acc[r], W::load8(w + r * cols + c), xv);
    }
    if (c < cols) {
      const std::size_t k = cols - c;
      float xt[8];
      copy_tail(x + c, k, xt);
      const Block xv = L::load_f32x8(xt);
      for (std::size_t r = 0; r < R; ++r) {
        typename W::T wt[8];
        copy_tail(w + r * cols + c, k, wt);
        L::fma_block(acc[r], W::load8(wt), xv);
      }
    }
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r) y[r] = static_cast<float>(L::reduce_tree(acc[r]));
  }

  /// Batch-1 kernel over positions [p, p + n): rows kRowTile at a time.
  template <class W>
  static void dense_each_position(const typename W::T* w, std::size_t rows, std::size_t cols, RowRange rr,
                                  const float* x, std::size_t p, std::size_t n, float* y);

  /// Each total of a tile rounded once to fp32: (row r, position b) into y[b * ys + r].
  template <std::size_t R, std::size_t B>
  static void store_tile(const Acc (&acc)[R][B], float* y, std::size_t ys) {
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (std::size_t b = 0; b < B; ++b) y[b * ys + r] = static_cast<float>(L::reduce_tree(acc[r][b]));
  }

  /// Rows [0, R) of w x the B positions of panel `xp` (position_tiles.hpp): each block of 8
  /// weights of a row is widened once and multiplied into the B positions' accumulators,
  /// which stay in registers; (row r, position b) goes to y[b * ys + r].
  template <class W, std::size_t R, std::size_t B>
  static void dense_tile(const typename W::T* w, std::size_t cols, const double* xp, float* y, std::size_t ys) {
    constexpr std::size_t kLineElems = kCacheLine / sizeof(typename W::T);
    const std::size_t stride = cols * sizeof(typename W::T);
    Acc acc[R][B];
    // One block of 8 columns: the R rows' weights at wc, the B positions' activations at xk.
    const typename W::T* wc = w;
    const double* xk = xp;
    const auto block = [&](const Block(&wv)[R]) {
#pragma GCC unroll 8
      for (std::size_t b = 0; b < B; ++b) {
        const Block xv = L::load_f64x8(xk + 8 * b);
#pragma GCC unroll 8
        for (std::size_t r = 0; r < R; ++r) L::fma_block(acc[r][b], wv[r], xv);
      }
      wc += 8;
      xk += 8 * B;
    };
    const auto full_block = [&] {
      Block wv[R];
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r) wv[r] = W::load8(wc + r * cols);
      block(wv);
    };
    std::size_t c = 0;
    for (; c + kLineElems <= cols; c += kLineElems) {
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r) L::template prefetch_row<R>(w, stride, c * sizeof(typename W::T), r);
#pragma GCC unroll 8
      for (std::size_t i = 0; i < kLineElems / 8; ++i) full_block();
    }
    for (; c + 8 <= cols; c += 8) full_block();
    if (c < cols) {  // the row's tail: weights copied into a zero-padded block; the panel is padded
      Block wv[R];
      for (std::size_t r = 0; r < R; ++r) {
        typename W::T wt[8];
        copy_tail(wc + r * cols, cols - c, wt);
        wv[r] = W::load8(wt);
      }
      block(wv);
    }
    store_tile(acc, y, ys);
  }

  /// Rows rr x positions [p, p + n) in register tiles of kDenseRows x kDensePositions; xw
  /// holds the n positions' activations in panels of kDensePositions (position rows xs
  /// doubles apart).
  template <class W>
  static void dense_register_tiles(const typename W::T* w, std::size_t rows, std::size_t cols, RowRange rr,
                                   const double* xw, std::size_t xs, std::size_t p, std::size_t n, float* y) {
    for_each_tile<L::kDenseRows, L::kDensePositions>(rr.begin, rr.end, n,
                                                     [&]<std::size_t R, std::size_t B>(std::size_t r, std::size_t j) {
      dense_tile<W, R, B>(w + r * cols, cols, xw + j * xs, y + (p + j) * rows + r, rows);
    });
  }

  static constexpr std::size_t dense_panel(std::size_t /*batch*/) { return L::kDensePositions; }

  template <class W>
  static void dense_positions(const typename W::T* w, std::size_t rows, std::size_t cols, RowRange rr,
                              const float* /*x*/, std::size_t /*batch*/, const double* xw, std::size_t xs,
                              std::size_t p, std::size_t n, float* y) {
    dense_register_tiles<W>(w, rows, cols, rr, xw, xs, p, n, y);
  }

  /// Activations of 8 elements as doubles: fp32 widened as they are used, or widened already.
  struct F32Activations {
    const float* x;
    Block load8(std::size_t c) const { return L::load_f32x8(x + c); }
  };
  struct F64Activations {
    const double* x;
    Block load8(std::size_t c) const { return L::load_f64x8(x + c); }
  };

  /// One row's 32-element group (16 bytes at p, scale byte s, activations xg[0..3]) into acc.
  static void mxfp4_group(const std::uint8_t* p, unsigned s, const Block* xg, Acc& acc) {
    const auto table = L::mxfp4_table(s);
#pragma GCC unroll 4
    for (std::size_t j = 0; j < 4; ++j) L::fma_block(acc, L::mxfp4_decode8(p + 4 * j, table), xg[j]);
  }

  /// y[r] = row r0 + r of m · x for r < R; X reads the activations (fp32 or widened), x32
  /// is the fp32 row (for the partial last group).
  template <std::size_t R, class X>
  static void mxfp4_rows(const Mxfp4Matrix& m, std::size_t r0, X x, const float* x32, float* y) {
    const std::size_t cols = m.cols;
    const std::size_t pstride = mxfp4_packed_stride(cols);
    const std::size_t sstride = mxfp4_scale_stride(cols);
    const std::uint8_t* packed = m.packed + r0 * pstride;
    const std::uint8_t* scales = m.scales + r0 * sstride;
    constexpr std::size_t kGroupBytes = kMxfp4GroupBytes;
    Acc acc[R];

    const std::size_t full_groups = cols / kMxfp4Group;
    for (std::size_t g = 0; g < full_groups; ++g) {
      if (g % (kCacheLine / kGroupBytes) == 0) {
#pragma GCC unroll 8
        for (std::size_t r = 0; r < R; ++r) L::template prefetch_row<R>(packed, pstride, g * kGroupBytes, r);
        // And one line of the next tile's scale bytes (its R scale rows are contiguous), so a
        // tile streaming from DRAM does not wait for its scales.
        const std::size_t line = g / (kCacheLine / kGroupBytes) * kCacheLine;
        if (line < R * sstride) L::prefetch(scales + R * sstride + line);
      }
      const std::size_t c = g * kMxfp4Group;
      const Block xv[4] = {x.load8(c), x.load8(c + 8), x.load8(c + 16), x.load8(c + 24)};
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r)
        mxfp4_group(packed + r * pstride + g * kGroupBytes, scales[r * sstride + g], xv, acc[r]);
    }

    // A last, partial group: bytes and activations copied into a zero-padded group, so
    // every padded element is code 0 (+0) times +0.
    const std::size_t rem = cols - full_groups * kMxfp4Group;
    if (rem != 0) {
      const std::size_t g = full_groups;
      float xt[kMxfp4Group] = {};
      std::memcpy(xt, x32 + g * kMxfp4Group, rem * sizeof(float));
      const Block xv[4] = {L::load_f32x8(xt), L::load_f32x8(xt + 8), L::load_f32x8(xt + 16), L::load_f32x8(xt + 24)};
      for (std::size_t r = 0; r < R; ++r) {
        std::uint8_t bytes[kGroupBytes] = {};
        mxfp4_partial_group(packed + r * pstride + g * kGroupBytes, rem, bytes);
        mxfp4_group(bytes, scales[r * sstride + g], xv, acc[r]);
      }
    }
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r) y[r] = static_cast<float>(L::reduce_tree(acc[r]));
  }

  /// Rows [r, r + R) for every batch row; xw holds the batch's activations widened to fp64,
  /// or is null (then they are converted as they are used).
  template <std::size_t R>
  static void mxfp4_tile(const Mxfp4Matrix& m, std::size_t r, const float* x, const double* xw, std::size_t batch,
                         float* y) {
    for (std::size_t b = 0; b < batch; ++b) {
      const float* xb = x + b * m.cols;
      float* yb = y + b * m.rows + r;
      if (xw != nullptr)
        mxfp4_rows<R>(m, r, F64Activations{xw + b * m.cols}, xb, yb);
      else
        mxfp4_rows<R>(m, r, F32Activations{xb}, xb, yb);
    }
  }

  /// Batch-1 kernel over positions [p, p + n): rows kRowTile at a time, all n positions of a
  /// row tile before the next, their activations widened to fp64 once.
  static void mxfp4_each_position(const Mxfp4Matrix& m, RowRange rr, const float* x, std::size_t p, std::size_t n,
                                  float* y);

  /// Rows [r0, r0 + R) x the B positions of panel `xp` (position_tiles.hpp): each block of 8
  /// weights is decoded once and multiplied into the B positions' accumulators; (row r0 + r,
  /// position b) goes to y[b * ys + r].
  template <std::size_t R, std::size_t B>
  static void mxfp4_pos_tile(const Mxfp4Matrix& m, std::size_t r0, const double* xp, float* y, std::size_t ys) {
    const std::size_t cols = m.cols;
    const std::size_t pstride = mxfp4_packed_stride(cols);
    const std::size_t sstride = mxfp4_scale_stride(cols);
    const std::uint8_t* packed = m.packed + r0 * pstride;
    const std::uint8_t* scales = m.scales + r0 * sstride;
    constexpr std::size_t kGroupBytes = kMxfp4GroupBytes;
    Acc acc[R][B];
    // One group of the R rows (their 16 bytes at p[r], scale bytes s[r]); the B positions'
    // activations of its first block at xk.
    const double* xk = xp;
    const auto group = [&](const std::uint8_t* const(&p)[R], const unsigned(&s)[R]) {
      decltype(L::mxfp4_table(0)) table[R];
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r) table[r] = L::mxfp4_table(s[r]);
#pragma GCC unroll 4
      for (std::size_t j = 0; j < 4; ++j) {
        Block wv[R];
#pragma GCC unroll 8
        for (std::size_t r = 0; r < R; ++r) wv[r] = L::mxfp4_decode8(p[r] + 4 * j, table[r]);
#pragma GCC unroll 8
        for (std::size_t b = 0; b < B; ++b) {
          const Block xv = L::load_f64x8(xk + 8 * (j * B + b));
#pragma GCC unroll 8
          for (std::size_t r = 0; r < R; ++r) L::fma_block(acc[r][b], wv[r], xv);
        }
      }
      xk += 32 * B;
    };
    const auto full_group = [&](std::size_t g) {
      const std::uint8_t* p[R];
      unsigned s[R];
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r) {
        p[r] = packed + r * pstride + g * kGroupBytes;
        s[r] = scales[r * sstride + g];
      }
      group(p, s);
    };

    constexpr std::size_t kLineGroups = kCacheLine / kGroupBytes;
    const std::size_t g1 = cols / kMxfp4Group;  // whole groups
    std::size_t g = 0;
    for (; g + kLineGroups <= g1; g += kLineGroups) {
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r) L::template prefetch_row<R>(packed, pstride, g * kGroupBytes, r);
      const std::size_t line = g / kLineGroups * kCacheLine;
      if (line < R * sstride) L::prefetch(scales + R * sstride + line);
#pragma GCC unroll 4
      for (std::size_t i = 0; i < kLineGroups; ++i) full_group(g + i);
    }
    for (; g < g1; ++g) full_group(g);
    // The row's last, partial group, zero-padded (mxfp4_partial_group): its padding is code
    // 0 (+0) times the panel's +0.
    const std::size_t rem = cols - g1 * kMxfp4Group;
    if (rem != 0) {
      std::uint8_t bytes[R][kGroupBytes] = {};
      const std::uint8_t* p[R];
      unsigned s[R];
      for (std::size_t r = 0; r < R; ++r) {
        mxfp4_partial_group(packed + r * pstride + g1 * kGroupBytes, rem, bytes[r]);
        p[r] = bytes[r];
        s[r] = scales[r * sstride + g1];
      }
      group(p, s);
    }
    store_tile(acc, y, ys);
  }

  /// Rows rr x positions [p, p + n) in register tiles of kMxfp4Rows x kMxfp4Positions; xw
  /// holds the n positions' activations in panels of kMxfp4Positions (position rows xs
  /// doubles apart).
  static void mxfp4_register_tiles(const Mxfp4Matrix& m, RowRange rr, const double* xw, std::size_t xs, std::size_t p,
                                   std::size_t n, float* y) {
    for_each_tile<L::kMxfp4Rows, L::kMxfp4Positions>(rr.begin, rr.end, n,
                                                     [&]<std::size_t R, std::size_t B>(std::size_t r, std::size_t j) {
      mxfp4_pos_tile<R, B>(m, r, xw + j * xs, y + (p + j) * m.rows + r, m.rows);
    });
  }

  static constexpr std::size_t mxfp4_panel(std::size_t /*batch*/) { return L::kMxfp4Positions; }

  static void mxfp4_positions(const Mxfp4Matrix& m, RowRange rr, const float* /*x*/, std::size_t /*batch*/,
                              const double* xw, std::size_t xs, std::size_t p, std::size_t n, float* y) {
    mxfp4_register_tiles(m, rr, xw, xs, p, n, y);
  }
};


// The batch-1 kernels are defined out of the class, like SimdOps' ops (simd_ops.hpp says why).

template <class L>
template <class W>
void PaddedBlockTiles<L>::dense_each_position(const typename W::T* w, std::size_t rows, std::size_t cols, RowRange rr,
                                              const float* x, std::size_t p, std::size_t n, float* y) {
  constexpr std::size_t kRowTile = L::kRowTile;
  for (std::size_t b = p; b < p + n; ++b) {
    std::size_t r = rr.begin;
    for (; r + kRowTile <= rr.end; r += kRowTile)
      dense_rows<W, kRowTile>(w + r * cols, cols, x + b * cols, y + b * rows + r);
    for (; r < rr.end; ++r) dense_rows<W, 1>(w + r * cols, cols, x + b * cols, y + b * rows + r);
  }
}

template <class L>
void PaddedBlockTiles<L>::mxfp4_each_position(const Mxfp4Matrix& m, RowRange rr, const float* x, std::size_t p,
                                              std::size_t n, float* y) {
  constexpr std::size_t kRowTile = L::kRowTile;
  const float* xp = x + p * m.cols;
  float* yp = y + p * m.rows;
  const double* xw = widened_activations(xp, n * m.cols);
  std::size_t r = rr.begin;
  for (; r + kRowTile <= rr.end; r += kRowTile) mxfp4_tile<kRowTile>(m, r, xp, xw, n, yp);
  for (; r < rr.end; ++r) mxfp4_tile<1>(m, r, xp, xw, n, yp);
}

}  // namespace k3::kernels
