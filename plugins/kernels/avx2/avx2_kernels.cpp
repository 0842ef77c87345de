// AVX2 + FMA kernels (built with -mavx2 -mfma; runs only after cpu_supported()).
//
// Same partition and tree as the scalar set, lane for lane:
//   Two ymm of 4 doubles per output hold the contract's accumulators: lo = acc[0..3],
//   hi = acc[4..7]. In each block of 8 elements (increasing i), element i adds its exact
//   fp64 product into lane i % 8. The fused multiply-add rounds exactly like the scalar's
//   add, because every product (bf16/fp32/E2M1·2^k weight times an fp32 activation) is exact
//   in fp64.
//   Tree (reduce_tree): b = lo + hi = (a0+a4, a1+a5, a2+a6, a3+a7); c = (b0+b2, b1+b3);
//   result c0 + c1 = ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
//   A row's last cols % 8 elements are copied into zero-padded blocks: a padded lane adds
//   0·0 = +0, which leaves its accumulator unchanged (an accumulator that starts at +0 can
//   never become -0, and +0 added to any other value, inf or NaN returns it unchanged).
// Batch 1: several rows run at once (independent accumulators) to hide the FMA latency; the
// additions within one row are never reordered. Batch > 1: tiles of rows x positions
// (common/position_tiles.hpp; below, before kPosTile, says which): each weight is widened or
// decoded once per tile and multiplied into every position of it, with the activations
// widened to fp64 once per call; each (row, position) accumulator pair still takes its
// additions in the batch-1 order. Tiles prefetch ahead in their rows and into the next
// tile's or pass's (common/row_prefetch.hpp says why); MXFP4 tiles also prefetch the next
// scale bytes.
#include <immintrin.h>

#include <cstring>

#include "../common/mxfp4_top32.hpp"
#include "../common/position_tiles.hpp"
#include "../common/row_prefetch.hpp"
#include "../common/widened_activations.hpp"
#include "avx2_ops.hpp"

namespace k3::kernels::avx2 {
namespace {

using sdk::Mxfp4Matrix;
using sdk::RowRange;

constexpr std::size_t kRowTile = 4;  // batch 1: rows at once
constexpr std::size_t kMxfp4Group = 32;

/// The rows of `range` that exist in a matrix of `rows` rows (an end past it is clipped,
/// as in the scalar set).
inline RowRange clip(RowRange range, std::size_t rows) {
  const std::size_t end = range.end < rows ? range.end : rows;
  return {range.begin < end ? range.begin : end, end};
}

/// One output's accumulators: lo = acc[0..3], hi = acc[4..7].
struct Acc {
  __m256d lo = _mm256_setzero_pd();
  __m256d hi = _mm256_setzero_pd();
};

/// 8 consecutive values as exact doubles, split like Acc.
struct Block {
  __m256d lo;
  __m256d hi;
};

inline void fma_block(Acc& a, Block w, Block x) {
  a.lo = _mm256_fmadd_pd(w.lo, x.lo, a.lo);
  a.hi = _mm256_fmadd_pd(w.hi, x.hi, a.hi);
}

/// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
inline double reduce_tree(const Acc& a) {
  const __m256d b = _mm256_add_pd(a.lo, a.hi);
  const __m128d c = _mm_add_pd(_mm256_castpd256_pd128(b), _mm256_extractf128_pd(b, 1));
  return _mm_cvtsd_f64(_mm_add_sd(c, _mm_unpackhi_pd(c, c)));
}

inline Block load_f32x8(const float* p) {
  return {_mm256_cvtps_pd(_mm_loadu_ps(p)), _mm256_cvtps_pd(_mm_loadu_ps(p + 4))};
}

/// The first k (< 8) values at p, zero-padded to a block, without reading past p + k.
template <class T>
inline void copy_tail(const T* p, std::size_t k, T (&out)[8]) {
  for (std::size_t i = 0; i < 8; ++i) out[i] = T{};
  std::memcpy(out, p, k * sizeof(T));
}

// Weight loaders: 8 consecutive weights of a row as exact doubles.
struct Bf16Weights {
  using T = std::uint16_t;
  static Block load8(const T* p) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i zero = _mm_setzero_si128();
    // Interleaving a zero half below each bf16 gives its fp32 bits (bits << 16).
    return {_mm256_cvtps_pd(_mm_castsi128_ps(_mm_unpacklo_epi16(zero, raw))),
            _mm256_cvtps_pd(_mm_castsi128_ps(_mm_unpackhi_epi16(zero, raw)))};
  }
  static __m256d load4(const T* p) {
    const __m128i raw = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_cvtps_pd(_mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), raw)));
  }
};

struct F32Weights {
  using T = float;
  static Block load8(const T* p) { return load_f32x8(p); }
  static __m256d load4(const T* p) { return _mm256_cvtps_pd(_mm_loadu_ps(p)); }
};

template <class W, std::size_t R>
inline void dense_rows(const typename W::T* w, std::size_t cols, const float* x, float* y) {
  constexpr std::size_t kLineElems = kCacheLine / sizeof(typename W::T);
  const std::size_t stride = cols * sizeof(typename W::T);
  Acc acc[R];
  std::size_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    if (c % kLineElems == 0) {  // ahead in this tile's rows and into the next tile's
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r) prefetch_row_ahead<R>(w, stride, c * sizeof(typename W::T), r);
    }
    const Block xv = load_f32x8(x + c);
#pragma GCC unroll 8
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
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r) y[r] = static_cast<float>(reduce_tree(acc[r]));
}

/// Batch-1 kernel over positions [p, p + n): rows kRowTile at a time.
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

inline Block load_f64x8(const double* p) { return {_mm256_loadu_pd(p), _mm256_loadu_pd(p + 4)}; }

// Batch > 1 comes in two shapes. Whole tiles of kPosTile = 8 positions (draft verification,
// prefill) reuse each widened or decoded weight across all 8 positions; the rest of a batch
// (n % 8 positions, so all of a batch under 8) takes the register tiles after this, which
// widen or decode each weight once per 2 (dense) or 4 (MXFP4) positions but keep everything
// in registers, and are faster when there are fewer than 8 positions to share the cost.
//
// Both read the activations widened to fp64 (position_tiles.hpp): once per call, in panels
// of 8 positions (or, for a batch under 8, of the register tile's width); the rest of a
// batch of 8 or more is widened again into the register tiles' panels.
//
// The 8-position tiles work in passes of kChunkPassRows rows; in a pass, the columns run in
// chunks of kChunkCols, so the chunk's panel of activations (256 columns x 8 positions, 16
// KiB) serves every row of the pass from L1 (as in the avx512 set), and each (row, position)
// accumulator pair is parked in memory between chunks (`Parked`), so it still takes its
// columns in increasing order. The lanes lo (columns 0-3 of each block) and hi (4-7) of one
// output never meet before reduce_tree, so a chunk runs them as two separate halves: one ymm
// accumulator per (row, position) for the half, which is what lets 8 positions share one
// widened weight vector (dense), or 12 accumulators fit beside 3 weight vectors and an
// activation vector (MXFP4), in 16 ymm.
//   Dense (direct_half): one row at a time, per half 4 weights widened in a register and
//   multiplied into the 8 positions (8 accumulators, the activations as FMA memory
//   operands): one widening per 8 FMAs, where the 2 x 2 tile needed one per 2.
//   MXFP4 (mxfp4_position_passes): its decode is dearer, so kScratchRows rows of a chunk
//   are decoded once into `scratch` (fp64, 6 KiB, in L1), and the 8 positions then run over
//   it 4 at a time (chunk_half: 3 rows x 4 positions = 12 accumulators, 3 weight vectors
//   and one activation vector per half).
// Measured on a 2-vCPU AVX-512 Xeon (docs/benchmarks-log.md, "avx2 batch-N tiles that reuse each
// weight across 8 positions"), batch 8 at 7168x3072 and 3072x7168, alternating with the
// register tiles alone: 0.73-0.77 of their time for bf16 and fp32, 0.81-0.85 for MXFP4; one
// batch-8 call costs 0.44-0.47 (bf16), 0.37-0.41 (fp32) and 0.46-0.52 (MXFP4) of eight
// batch-1 calls there, where the register tiles cost 0.53-0.65, 0.48-0.51 and 0.58-0.69.
// Tried there too: bf16 and fp32 through the scratch (storing and reloading the widened
// weights costs about what widening them in registers for 8 positions does: as fast as the
// direct tile for fp32, slower for bf16); scratch tiles of 2 x 4, 3 x 3, 4 x 3 and 2 x 6 (none
// clearly faster than 3 x 4); chunks of 128 and 512 columns and passes of 24 rows (within
// the noise of 256 and 12); the 8-position tiles at n = 2 and 4 (slower or no gain, hence
// the split at 8).
constexpr std::size_t kPosTile = 8;         // positions per panel
constexpr std::size_t kGroupPositions = 4;  // MXFP4: positions whose accumulators are in registers at once
constexpr std::size_t kScratchRows = 3;     // MXFP4: rows decoded at once
constexpr std::size_t kChunkCols = 256;     // a multiple of the MXFP4 group (32)
constexpr std::size_t kChunkPassRows = 12;  // whole tiles of kScratchRows
// The register tiles: rows x positions, 2 ymm per (row, position), the rest of the 16 ymm for
// one block of weights per row and one position's activations. Chosen on Zen 3 at 7168x3072
// and 3072x7168, batch 8 (when they were the only batch-N path), against 1x4, 2x1, 2x3
// (spills) and 4x1: bf16 and fp32 fastest as 2 rows x 2 positions, MXFP4 as 1 row x 4.
constexpr std::size_t kDenseRows = 2;
constexpr std::size_t kDensePositions = 2;
constexpr std::size_t kMxfp4Rows = 1;
constexpr std::size_t kMxfp4Positions = 4;

/// The accumulator halves of one pass between chunks: (row i of the pass, position b, half
/// h: 0 = lo, 1 = hi) at [(i * kPosTile + b) * 2 + h].
using Parked = __m256d[kChunkPassRows * kPosTile * 2];

/// Makes the compiler load v into a register here, once, instead of folding the load into
/// every FMA that uses it.
inline void in_register(__m256d& v) { asm("" : "+x"(v)); }

/// (row r, position b) of the pass's parked accumulators, rounded once to fp32 into
/// y[b * ys + r] for rows [r0, r1) and positions [0, kPosTile).
inline void store_parked(const __m256d* park, std::size_t r0, std::size_t r1, float* y, std::size_t ys) {
  for (std::size_t r = r0; r < r1; ++r)
    for (std::size_t b = 0; b < kPosTile; ++b) {
      const __m256d* a = park + ((r - r0) * kPosTile + b) * 2;
      y[b * ys + r] = static_cast<float>(reduce_tree(Acc{a[0], a[1]}));
    }
}

/// Calls chunk(r0, r1, p, c0, c1) over rows [begin, end) in passes [r0, r1) of
/// kChunkPassRows rows; within a pass, for each panel of kPosTile positions starting at p
/// (n a multiple of kPosTile), the column chunks [c0, c1) of [0, xs) in increasing order,
/// so every parked accumulator takes its columns in the batch-1 order. After a panel's last
/// chunk, the pass's totals go to y (store_parked).
template <class Chunk>
inline void for_each_pass_chunk(std::size_t begin, std::size_t end, std::size_t n, std::size_t xs,
                                const Parked& park, float* y, std::size_t ys, Chunk&& chunk) {
  for (std::size_t r0 = begin; r0 < end; r0 += kChunkPassRows) {
    const std::size_t r1 = end - r0 < kChunkPassRows ? end : r0 + kChunkPassRows;
    for (std::size_t p = 0; p < n; p += kPosTile) {
      for (std::size_t c0 = 0; c0 < xs;) {
        const std::size_t c1 = xs - c0 <= kChunkCols ? xs : c0 + kChunkCols;
        chunk(r0, r1, p, c0, c1);
        c0 = c1;
      }
      store_parked(park, r0, r1, y + p * ys, ys);
    }
  }
}

/// Half h of `blocks` column blocks of one row (wp at the chunk's first weight) x the 8
/// positions of the panel at xk (the chunk's first block, first position, the half's first
/// lane): each 4 weights of the half are widened once, in a register, and multiplied into
/// the 8 positions. The accumulators come from park[b * 2] (or zero, if `fresh`) and go back
/// there. With h = 0 and a `pass`, it prefetches ahead in row `row` of the pass at `pass`,
/// past its end into the next pass's (c0: the chunk's first column).
template <class W>
inline void direct_half(const typename W::T* wp, std::size_t h, std::size_t blocks, const double* xk, bool fresh,
                        __m256d* park, const typename W::T* pass, std::size_t stride, std::size_t row,
                        std::size_t c0) {
  constexpr std::size_t kLineElems = kCacheLine / sizeof(typename W::T);
  __m256d acc[kPosTile];
#pragma GCC unroll 8
  for (std::size_t b = 0; b < kPosTile; ++b) acc[b] = fresh ? _mm256_setzero_pd() : park[b * 2];
  for (std::size_t k = 0; k < blocks; ++k) {
    if (pass != nullptr && h == 0 && (c0 + 8 * k) % kLineElems == 0)
      prefetch_row_ahead<kChunkPassRows>(pass, stride, (c0 + 8 * k) * sizeof(typename W::T), row);
    __m256d wv = W::load4(wp + 8 * k + 4 * h);
    in_register(wv);
#pragma GCC unroll 8
    for (std::size_t b = 0; b < kPosTile; ++b) acc[b] = _mm256_fmadd_pd(wv, _mm256_loadu_pd(xk + 8 * b), acc[b]);
    xk += 8 * kPosTile;
  }
#pragma GCC unroll 8
  for (std::size_t b = 0; b < kPosTile; ++b) park[b * 2] = acc[b];
}

/// Rows [begin, end) of w x positions [0, n) (n a multiple of kPosTile) of the panels xw
/// (position rows xs doubles apart, xs = cols rounded up to whole blocks), (row r,
/// position b) into y[b * ys + r].
template <class W>
void dense_position_passes(const typename W::T* w, std::size_t cols, std::size_t begin, std::size_t end,
                           std::size_t n, const double* xw, std::size_t xs, float* y, std::size_t ys) {
  alignas(64) Parked park;
  const std::size_t stride = cols * sizeof(typename W::T);
  const std::size_t full = cols / 8 * 8;  // columns in whole blocks
  for_each_pass_chunk(begin, end, n, xs, park, y, ys, [&](std::size_t r0, std::size_t r1, std::size_t p,
                                                          std::size_t c0, std::size_t c1) {
    const double* panel = xw + p * xs;
    const std::size_t blocks = ((c1 < full ? c1 : full) - c0) / 8;
    for (std::size_t r = r0; r < r1; ++r) {
      const typename W::T* row = w + r * cols;
      __m256d* pr = park + (r - r0) * kPosTile * 2;
      for (std::size_t h = 0; h < 2; ++h)
        direct_half<W>(row + c0, h, blocks, panel + c0 * kPosTile + 4 * h, c0 == 0, pr + h, w + r0 * cols, stride,
                       r - r0, c0);
      if (c1 > full) {  // the row's tail: copied into a zero-padded block (the panel is padded too)
        typename W::T wt[8];
        copy_tail(row + full, cols - full, wt);
        for (std::size_t h = 0; h < 2; ++h)
          direct_half<W>(wt, h, 1, panel + full * kPosTile + 4 * h, false, pr + h, nullptr, 0, 0, 0);
      }
    }
  });
}

/// Each total of a tile rounded once to fp32: (row r, position b) into y[b * ys + r].
template <std::size_t R, std::size_t B>
inline void store_tile(const Acc (&acc)[R][B], float* y, std::size_t ys) {
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (std::size_t b = 0; b < B; ++b) y[b * ys + r] = static_cast<float>(reduce_tree(acc[r][b]));
}

/// Rows [0, R) of w x the B positions of panel `xp` (position_tiles.hpp): each block of 8
/// weights of a row is widened once and multiplied into the B positions' accumulators,
/// which stay in registers; (row r, position b) goes to y[b * ys + r].
template <class W, std::size_t R, std::size_t B>
inline void dense_tile(const typename W::T* w, std::size_t cols, const double* xp, float* y, std::size_t ys) {
  constexpr std::size_t kLineElems = kCacheLine / sizeof(typename W::T);
  const std::size_t stride = cols * sizeof(typename W::T);
  Acc acc[R][B];
  // One block of 8 columns: the R rows' weights at wc, the B positions' activations at xk.
  const typename W::T* wc = w;
  const double* xk = xp;
  const auto block = [&](const Block (&wv)[R]) {
#pragma GCC unroll 8
    for (std::size_t b = 0; b < B; ++b) {
      const Block xv = load_f64x8(xk + 8 * b);
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r) fma_block(acc[r][b], wv[r], xv);
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
    for (std::size_t r = 0; r < R; ++r) prefetch_row_ahead<R>(w, stride, c * sizeof(typename W::T), r);
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

template <class W>
void matmul_dense(const typename W::T* w, std::size_t rows, std::size_t cols, RowRange range, const float* x,
                  std::size_t batch, float* y) noexcept {
  const RowRange rr = clip(range, rows);
  if (rr.begin == rr.end) return;
  if (batch == 1) return dense_each_position<W>(w, rows, cols, rr, x, 0, 1, y);
  const std::size_t xs = round_up(cols, 8);
  // The register tiles over positions [p, p + n), whose activations xw are in panels of
  // kDensePositions.
  const auto register_tiles = [&](const double* xw, std::size_t p, std::size_t n) {
    for_each_tile<kDenseRows, kDensePositions>(
        rr.begin, rr.end, n, [&]<std::size_t R, std::size_t B>(std::size_t r, std::size_t j) {
          dense_tile<W, R, B>(w + r * cols, cols, xw + j * xs, y + (p + j) * rows + r, rows);
        });
  };
  over_widened_positions(
      x, batch, cols, xs, batch >= kPosTile ? kPosTile : kDensePositions,
      [&](const double* xw, std::size_t p0, std::size_t n) {
        if (batch < kPosTile) return register_tiles(xw, p0, n);
        const std::size_t whole = n / kPosTile * kPosTile;
        if (whole != 0) dense_position_passes<W>(w, cols, rr.begin, rr.end, whole, xw, xs, y + p0 * rows, rows);
        if (whole == n) return;
        // The rest, widened again in panels of the register tiles (xw is no longer needed).
        const double* xr = widened_panels(x + (p0 + whole) * cols, n - whole, cols, xs, kDensePositions);
        if (xr != nullptr) register_tiles(xr, p0 + whole, n - whole);
        else dense_each_position<W>(w, rows, cols, rr, x, p0 + whole, n - whole, y);
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

// MXFP4. Every weight E2M1[code]·2^(s-127) is a double whose mantissa has at most its top
// bit set, so its low 32 bits are zero. For each scale byte s the top halves of the 8
// magnitudes |E2M1|·2^(s-127) (0 for s = 255, as in the scalar set) are one 32-byte table,
// computed at compile time from the same products as the scalar set; a negative code's
// weight is the magnitude's top half with the sign bit set.
//
// Decode of 8 weights (one little-endian 32-bit word, low nibble = even column): the word
// is broadcast and lane j shifted left so code σ(j) sits in bits 28-31, σ = (0,1,4,5,2,3,6,7);
// bits 28-30 (shifted down) pick the magnitude with vpermd and bit 31 is already the sign.
// Interleaving those 8 top halves with zeros (vpunpckldq / vpunpckhdq, which work within each
// 128-bit half) gives weights 0-3 and 4-7 as doubles, in order thanks to σ. Per 8 weights:
// 2 shifts, a lookup, an and, an or, 2 unpacks and 2 FMAs, no fp32 -> fp64 conversion.
// Constant-initialised (8 KiB of read-only data): no initialiser runs at dlopen.
constexpr auto kMxfp4Magnitudes = mxfp4_top32_tables<8>();

/// The 8 weights whose codes are the nibbles of four_bytes, looked up in `table` (the
/// group's magnitudes).
inline Block decode8(const std::uint8_t* four_bytes, __m256i table) {
  const __m256i shifts = _mm256_setr_epi32(28, 24, 12, 8, 20, 16, 4, 0);  // 28 - 4·σ(j)
  const __m256i sign_bit = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  std::uint32_t word = 0;
  std::memcpy(&word, four_bytes, sizeof word);
  const __m256i v = _mm256_sllv_epi32(_mm256_set1_epi32(static_cast<int>(word)), shifts);
  const __m256i mag = _mm256_permutevar8x32_epi32(table, _mm256_srli_epi32(v, 28));
  const __m256i top = _mm256_or_si256(mag, _mm256_and_si256(v, sign_bit));
  const __m256i zero = _mm256_setzero_si256();
  return {_mm256_castsi256_pd(_mm256_unpacklo_epi32(zero, top)), _mm256_castsi256_pd(_mm256_unpackhi_epi32(zero, top))};
}

/// Activations of 8 elements as doubles.
struct F32Activations {
  const float* x;
  Block load8(std::size_t c) const { return load_f32x8(x + c); }
};
struct F64Activations {
  const double* x;
  Block load8(std::size_t c) const { return {_mm256_loadu_pd(x + c), _mm256_loadu_pd(x + c + 4)}; }
};

/// One row's 32-element group (16 bytes at p, activations xg[0..3]) into acc.
inline void mxfp4_group(const std::uint8_t* p, unsigned s, const Block* xg, Acc& acc) {
  const __m256i table = _mm256_load_si256(reinterpret_cast<const __m256i*>(kMxfp4Magnitudes[s].top.data()));
#pragma GCC unroll 4
  for (std::size_t j = 0; j < 4; ++j) fma_block(acc, decode8(p + 4 * j, table), xg[j]);
}

template <std::size_t R, class X>
inline void mxfp4_rows(const Mxfp4Matrix& m, std::size_t r0, X x, const float* x32, float* y) {
  const std::size_t cols = m.cols;
  const std::size_t pstride = (cols + 1) / 2;
  const std::size_t sstride = (cols + kMxfp4Group - 1) / kMxfp4Group;
  const std::uint8_t* packed = m.packed + r0 * pstride;
  const std::uint8_t* scales = m.scales + r0 * sstride;
  Acc acc[R];

  const std::size_t full_groups = cols / kMxfp4Group;
  constexpr std::size_t kGroupBytes = kMxfp4Group / 2;
  for (std::size_t g = 0; g < full_groups; ++g) {
    if (g % (kCacheLine / kGroupBytes) == 0) {
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r) prefetch_row_ahead<R>(packed, pstride, g * kGroupBytes, r);
      // And one line of the next tile's scale bytes (its R scale rows are contiguous), so a
      // tile streaming from DRAM does not wait for its scales.
      const std::size_t line = g / (kCacheLine / kGroupBytes) * kCacheLine;
      if (line < R * sstride) _mm_prefetch(reinterpret_cast<const char*>(scales + R * sstride + line), _MM_HINT_T0);
    }
    const std::size_t c = g * kMxfp4Group;
    const Block xv[4] = {x.load8(c), x.load8(c + 8), x.load8(c + 16), x.load8(c + 24)};
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r) mxfp4_group(packed + r * pstride + g * kGroupBytes, scales[r * sstride + g], xv, acc[r]);
  }

  // A last, partial group: bytes and activations are copied into a zero-padded group, so
  // nothing past the row is read and every padded element is code 0 (+0) times +0; for odd
  // cols the unused high nibble of the last byte is cleared.
  const std::size_t rem = cols - full_groups * kMxfp4Group;
  if (rem != 0) {
    const std::size_t g = full_groups;
    float xt[kMxfp4Group] = {};
    std::memcpy(xt, x32 + g * kMxfp4Group, rem * sizeof(float));
    const Block xv[4] = {load_f32x8(xt), load_f32x8(xt + 8), load_f32x8(xt + 16), load_f32x8(xt + 24)};
    for (std::size_t r = 0; r < R; ++r) {
      std::uint8_t bytes[kGroupBytes] = {};
      std::memcpy(bytes, packed + r * pstride + g * kGroupBytes, (rem + 1) / 2);
      if (rem % 2 != 0) bytes[rem / 2] &= 0x0F;
      mxfp4_group(bytes, scales[r * sstride + g], xv, acc[r]);
    }
  }
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r) y[r] = static_cast<float>(reduce_tree(acc[r]));
}

/// Rows [r, r + R) for every batch row; xw holds the batch's activations widened to fp64,
/// or is null (then they are converted as they are used).
template <std::size_t R>
inline void mxfp4_tile(const Mxfp4Matrix& m, std::size_t r, const float* x, const double* xw, std::size_t batch,
                       float* y) {
  for (std::size_t b = 0; b < batch; ++b) {
    const float* xb = x + b * m.cols;
    float* yb = y + b * m.rows + r;
    if (xw != nullptr) mxfp4_rows<R>(m, r, F64Activations{xw + b * m.cols}, xb, yb);
    else mxfp4_rows<R>(m, r, F32Activations{xb}, xb, yb);
  }
}

/// Batch-1 kernel over positions [p, p + n).
void mxfp4_each_position(const Mxfp4Matrix& m, RowRange rr, const float* x, std::size_t p, std::size_t n, float* y) {
  const float* xp = x + p * m.cols;
  float* yp = y + p * m.rows;
  const double* xw = widened_activations(xp, n * m.cols);
  std::size_t r = rr.begin;
  for (; r + kRowTile <= rr.end; r += kRowTile) mxfp4_tile<kRowTile>(m, r, xp, xw, n, yp);
  for (; r < rr.end; ++r) mxfp4_tile<1>(m, r, xp, xw, n, yp);
}

inline void store_block(double* out, Block v) {
  _mm256_store_pd(out, v.lo);
  _mm256_store_pd(out + 4, v.hi);
}

/// Columns [c0, c1) (multiples of the group) of rows [r, r + R) decoded to doubles at
/// s + i * kChunkCols (row r + i); the padding of a partial last group is +0. r0 is the
/// pass's first row (for the prefetches).
inline void mxfp4_decode(const Mxfp4Matrix& m, std::size_t r, std::size_t R, std::size_t c0, std::size_t c1, double* s,
                         std::size_t r0) {
  const std::size_t cols = m.cols;
  const std::size_t pstride = (cols + 1) / 2;
  const std::size_t sstride = (cols + kMxfp4Group - 1) / kMxfp4Group;
  constexpr std::size_t kGroupBytes = kMxfp4Group / 2;
  constexpr std::size_t kLineGroups = kCacheLine / kGroupBytes;
  const std::size_t full = cols / kMxfp4Group;  // whole groups
  const std::size_t g1 = c1 / kMxfp4Group;
  for (std::size_t i = 0; i < R; ++i) {
    const std::uint8_t* prow = m.packed + (r + i) * pstride;
    const std::uint8_t* srow = m.scales + (r + i) * sstride;
    double* out = s + i * kChunkCols - c0;
    for (std::size_t g = c0 / kMxfp4Group; g < g1; ++g) {
      if (g % kLineGroups == 0) {
        // Ahead in this row, and past its end into the next pass's row; the first row of a
        // pass also fetches a line of the next pass's scale bytes (its rows are contiguous).
        prefetch_row_ahead<kChunkPassRows>(m.packed + r0 * pstride, pstride, g * kGroupBytes, r + i - r0);
        const std::size_t line = g / kLineGroups * kCacheLine;
        if (r + i == r0 && line < kChunkPassRows * sstride)
          _mm_prefetch(reinterpret_cast<const char*>(m.scales + (r0 + kChunkPassRows) * sstride + line), _MM_HINT_T0);
      }
      const std::uint8_t* p = prow + g * kGroupBytes;
      std::uint8_t bytes[kGroupBytes] = {};
      if (g >= full) {
        // The row's last, partial group: its bytes copied into a zero-padded group (the
        // unused high nibble of an odd last column cleared), so its padding is code 0 (+0)
        // times the panel's +0.
        const std::size_t rem = cols - full * kMxfp4Group;
        std::memcpy(bytes, p, (rem + 1) / 2);
        if (rem % 2 != 0) bytes[rem / 2] &= 0x0F;
        p = bytes;
      }
      const __m256i table = _mm256_load_si256(reinterpret_cast<const __m256i*>(kMxfp4Magnitudes[srow[g]].top.data()));
#pragma GCC unroll 4
      for (std::size_t j = 0; j < 4; ++j) store_block(out + g * kMxfp4Group + 8 * j, decode8(p + 4 * j, table));
    }
  }
}

/// Half of `blocks` column blocks: rows [0, R) of the scratch at s (rows kChunkCols doubles
/// apart; s at the half's first lane) x kGroupPositions positions of the panel at xk (the
/// chunk's first block, the group's first position, the half's first lane). The
/// accumulators of (row r, position g) come from park[(r * kPosTile + g) * 2] (or zero, if
/// `fresh`) and go back there. A loop of its own, with nothing after it but the stores, so
/// the compiler keeps the R x 4 accumulators in registers (with 3 rows: 12 accumulators,
/// the 3 rows' weights and one activation vector, the 16 ymm).
template <std::size_t R>
inline void chunk_half(const double* s, std::size_t blocks, const double* xk, bool fresh, __m256d* park) {
  constexpr std::size_t G = kGroupPositions;
  __m256d acc[R][G];
#pragma GCC unroll 4
  for (std::size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (std::size_t g = 0; g < G; ++g) acc[r][g] = fresh ? _mm256_setzero_pd() : park[(r * kPosTile + g) * 2];
  for (std::size_t k = 0; k < blocks; ++k) {
    __m256d wv[R];
#pragma GCC unroll 4
    for (std::size_t r = 0; r < R; ++r) wv[r] = _mm256_load_pd(s + r * kChunkCols + 8 * k);
#pragma GCC unroll 4
    for (std::size_t g = 0; g < G; ++g) {
      __m256d xv = _mm256_load_pd(xk + 8 * g);
      in_register(xv);
#pragma GCC unroll 4
      for (std::size_t r = 0; r < R; ++r) acc[r][g] = _mm256_fmadd_pd(wv[r], xv, acc[r][g]);
    }
    xk += 8 * kPosTile;
  }
#pragma GCC unroll 4
  for (std::size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (std::size_t g = 0; g < G; ++g) park[(r * kPosTile + g) * 2] = acc[r][g];
}

/// Rows [0, R) of the scratch x the 8 positions of the panel chunk at xc, both halves.
template <std::size_t R>
inline void chunk_positions(const double* s, std::size_t blocks, const double* xc, bool fresh, __m256d* park) {
  for (std::size_t b0 = 0; b0 < kPosTile; b0 += kGroupPositions)
    for (std::size_t h = 0; h < 2; ++h) chunk_half<R>(s + 4 * h, blocks, xc + 8 * b0 + 4 * h, fresh, park + b0 * 2 + h);
}

/// Rows [begin, end) of m x positions [0, n) (n a multiple of kPosTile) of the panels xw
/// (position rows xs doubles apart, xs = cols rounded up to whole groups), (row r,
/// position b) into y[b * ys + r].
inline void mxfp4_position_passes(const Mxfp4Matrix& m, std::size_t begin, std::size_t end, std::size_t n,
                                  const double* xw, std::size_t xs, float* y, std::size_t ys) {
  alignas(64) Parked park;
  alignas(64) double scratch[kScratchRows * kChunkCols];
  for_each_pass_chunk(begin, end, n, xs, park, y, ys, [&](std::size_t r0, std::size_t r1, std::size_t p,
                                                          std::size_t c0, std::size_t c1) {
    const std::size_t blocks = (c1 - c0) / 8;
    const double* xc = xw + p * xs + c0 * kPosTile;  // block c0 / 8, first position
    for (std::size_t r = r0; r < r1; r += kScratchRows) {
      const std::size_t R = r1 - r < kScratchRows ? r1 - r : kScratchRows;
      mxfp4_decode(m, r, R, c0, c1, scratch, r0);
      __m256d* pr = park + (r - r0) * kPosTile * 2;
      if (R == 3) chunk_positions<3>(scratch, blocks, xc, c0 == 0, pr);
      else if (R == 2) chunk_positions<2>(scratch, blocks, xc, c0 == 0, pr);
      else chunk_positions<1>(scratch, blocks, xc, c0 == 0, pr);
    }
  });
}

/// Rows [r0, r0 + R) x the B positions of panel `xp` (position_tiles.hpp): each block of 8
/// weights is decoded once and multiplied into the B positions' accumulators; (row r0 + r,
/// position b) goes to y[b * ys + r].
template <std::size_t R, std::size_t B>
inline void mxfp4_pos_tile(const Mxfp4Matrix& m, std::size_t r0, const double* xp, float* y, std::size_t ys) {
  const std::size_t cols = m.cols;
  const std::size_t pstride = (cols + 1) / 2;
  const std::size_t sstride = (cols + kMxfp4Group - 1) / kMxfp4Group;
  const std::uint8_t* packed = m.packed + r0 * pstride;
  const std::uint8_t* scales = m.scales + r0 * sstride;
  constexpr std::size_t kGroupBytes = kMxfp4Group / 2;
  Acc acc[R][B];
  // One group of the R rows (their 16 bytes at p[r], scale bytes s[r]); the B positions'
  // activations of its first block at xk.
  const double* xk = xp;
  const auto group = [&](const std::uint8_t* const (&p)[R], const unsigned (&s)[R]) {
    __m256i table[R];
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r)
      table[r] = _mm256_load_si256(reinterpret_cast<const __m256i*>(kMxfp4Magnitudes[s[r]].top.data()));
#pragma GCC unroll 4
    for (std::size_t j = 0; j < 4; ++j) {
      Block wv[R];
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r) wv[r] = decode8(p[r] + 4 * j, table[r]);
#pragma GCC unroll 8
      for (std::size_t b = 0; b < B; ++b) {
        const Block xv = load_f64x8(xk + 8 * (j * B + b));
#pragma GCC unroll 8
        for (std::size_t r = 0; r < R; ++r) fma_block(acc[r][b], wv[r], xv);
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
    for (std::size_t r = 0; r < R; ++r) prefetch_row_ahead<R>(packed, pstride, g * kGroupBytes, r);
    const std::size_t line = g / kLineGroups * kCacheLine;
    if (line < R * sstride) _mm_prefetch(reinterpret_cast<const char*>(scales + R * sstride + line), _MM_HINT_T0);
#pragma GCC unroll 4
    for (std::size_t i = 0; i < kLineGroups; ++i) full_group(g + i);
  }
  for (; g < g1; ++g) full_group(g);
  // The row's last, partial group: its bytes copied into a zero-padded group (the unused
  // high nibble of an odd last column cleared), so its padding is code 0 (+0) times the
  // panel's +0.
  const std::size_t rem = cols - g1 * kMxfp4Group;
  if (rem != 0) {
    std::uint8_t bytes[R][kGroupBytes] = {};
    const std::uint8_t* p[R];
    unsigned s[R];
    for (std::size_t r = 0; r < R; ++r) {
      std::memcpy(bytes[r], packed + r * pstride + g1 * kGroupBytes, (rem + 1) / 2);
      if (rem % 2 != 0) bytes[r][rem / 2] &= 0x0F;
      p[r] = bytes[r];
      s[r] = scales[r * sstride + g1];
    }
    group(p, s);
  }
  store_tile(acc, y, ys);
}

void matmul_mxfp4(const Mxfp4Matrix& m, RowRange range, const float* x, std::size_t batch, float* y) noexcept {
  const RowRange rr = clip(range, m.rows);
  if (rr.begin == rr.end) return;
  if (batch == 1) return mxfp4_each_position(m, rr, x, 0, 1, y);
  const std::size_t xs = round_up(m.cols, kMxfp4Group);
  // The register tiles over positions [p, p + n), whose activations xw are in panels of
  // kMxfp4Positions.
  const auto register_tiles = [&](const double* xw, std::size_t p, std::size_t n) {
    for_each_tile<kMxfp4Rows, kMxfp4Positions>(
        rr.begin, rr.end, n, [&]<std::size_t R, std::size_t B>(std::size_t r, std::size_t j) {
          mxfp4_pos_tile<R, B>(m, r, xw + j * xs, y + (p + j) * m.rows + r, m.rows);
        });
  };
  over_widened_positions(
      x, batch, m.cols, xs, batch >= kPosTile ? kPosTile : kMxfp4Positions,
      [&](const double* xw, std::size_t p0, std::size_t n) {
        if (batch < kPosTile) return register_tiles(xw, p0, n);
        const std::size_t whole = n / kPosTile * kPosTile;
        if (whole != 0) mxfp4_position_passes(m, rr.begin, rr.end, whole, xw, xs, y + p0 * m.rows, m.rows);
        if (whole == n) return;
        // The rest, widened again in panels of the register tiles (xw is no longer needed).
        const double* xr = widened_panels(x + (p0 + whole) * m.cols, n - whole, m.cols, xs, kMxfp4Positions);
        if (xr != nullptr) register_tiles(xr, p0 + whole, n - whole);
        else mxfp4_each_position(m, rr, x, p0 + whole, n - whole, y);
      },
      [&](std::size_t p0, std::size_t n) { mxfp4_each_position(m, rr, x, p0, n, y); });
}

}  // namespace

const Ops ops = {matmul_bf16, matmul_f32, matmul_mxfp4, dot_f32};

}  // namespace k3::kernels::avx2
