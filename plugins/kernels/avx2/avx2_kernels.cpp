// AVX2 + FMA kernels (built with -mavx2 -mfma; runs only after cpu_supported()).
//
// The ops, the batch-1 kernels and the register tiles are the shared ones of the sets that
// hold 8 doubles as a Block and zero-pad row tails (common/padded_block_tiles.hpp, over
// `Lanes` below; common/simd_ops.hpp); this file holds what is AVX2's own: the lanes, and
// the batch-N tiles that reuse each weight across 8 positions.
//
// Lanes: two ymm of 4 doubles per output hold the contract's accumulators: lo = acc[0..3],
// hi = acc[4..7]. In each block of 8 elements (increasing i), element i adds its exact fp64
// product into lane i % 8. The fused multiply-add rounds exactly like the scalar's add,
// because every product (bf16/fp32/E2M1·2^k weight times an fp32 activation) is exact in
// fp64. Tree (reduce_tree): b = lo + hi = (a0+a4, a1+a5, a2+a6, a3+a7); c = (b0+b2, b1+b3);
// result c0 + c1 = ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)). Tiles prefetch ahead in their
// rows and into the next tile's or pass's (common/row_prefetch.hpp says why); MXFP4 tiles
// also prefetch the next scale bytes.
#include <immintrin.h>

#include <cstring>

#include "../common/mxfp4_groups.hpp"
#include "../common/mxfp4_top32.hpp"
#include "../common/padded_block_tiles.hpp"
#include "../common/position_tiles.hpp"
#include "../common/row_prefetch.hpp"
#include "../common/simd_ops.hpp"
#include "../common/simd_sets.hpp"
#include "../common/widened_activations.hpp"

namespace k3::kernels::avx2 {
namespace {

using sdk::Mxfp4Matrix;
using sdk::RowRange;

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

/// What common/padded_block_tiles.hpp needs of AVX2.
struct Lanes {
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

  static constexpr std::size_t kRowTile = 4;  // batch 1: rows at once
  // The register tiles: rows x positions, 2 ymm per (row, position), the rest of the 16 ymm
  // for one block of weights per row and one position's activations. Chosen on Zen 3 at
  // 7168x3072 and 3072x7168, batch 8 (when they were the only batch-N path), against 1x4,
  // 2x1, 2x3 (spills) and 4x1: bf16 and fp32 fastest as 2 rows x 2 positions, MXFP4 as 1 row x 4.
  static constexpr std::size_t kDenseRows = 2;
  static constexpr std::size_t kDensePositions = 2;
  static constexpr std::size_t kMxfp4Rows = 1;
  static constexpr std::size_t kMxfp4Positions = 4;

  static void fma_block(Acc& a, Block w, Block x) {
    a.lo = _mm256_fmadd_pd(w.lo, x.lo, a.lo);
    a.hi = _mm256_fmadd_pd(w.hi, x.hi, a.hi);
  }

  /// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
  static double reduce_tree(const Acc& a) {
    const __m256d b = _mm256_add_pd(a.lo, a.hi);
    const __m128d c = _mm_add_pd(_mm256_castpd256_pd128(b), _mm256_extractf128_pd(b, 1));
    return _mm_cvtsd_f64(_mm_add_sd(c, _mm_unpackhi_pd(c, c)));
  }

  static Block load_f32x8(const float* p) {
    return {_mm256_cvtps_pd(_mm_loadu_ps(p)), _mm256_cvtps_pd(_mm_loadu_ps(p + 4))};
  }

  static Block load_f64x8(const double* p) { return {_mm256_loadu_pd(p), _mm256_loadu_pd(p + 4)}; }

  // Weight loaders: 8 consecutive weights of a row as exact doubles (load4: the first 4).
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

  /// The group's 8 magnitudes (kMxfp4Magnitudes) for scale byte s.
  static __m256i mxfp4_table(unsigned s) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(kMxfp4Magnitudes[s].top.data()));
  }

  /// The 8 weights whose codes are the nibbles of four_bytes, looked up in `table` (the
  /// group's magnitudes).
  static Block mxfp4_decode8(const std::uint8_t* four_bytes, __m256i table) {
    const __m256i shifts = _mm256_setr_epi32(28, 24, 12, 8, 20, 16, 4, 0);  // 28 - 4·σ(j)
    const __m256i sign_bit = _mm256_set1_epi32(static_cast<int>(0x80000000u));
    std::uint32_t word = 0;
    std::memcpy(&word, four_bytes, sizeof word);
    const __m256i v = _mm256_sllv_epi32(_mm256_set1_epi32(static_cast<int>(word)), shifts);
    const __m256i mag = _mm256_permutevar8x32_epi32(table, _mm256_srli_epi32(v, 28));
    const __m256i top = _mm256_or_si256(mag, _mm256_and_si256(v, sign_bit));
    const __m256i zero = _mm256_setzero_si256();
    return {_mm256_castsi256_pd(_mm256_unpacklo_epi32(zero, top)),
            _mm256_castsi256_pd(_mm256_unpackhi_epi32(zero, top))};
  }

  template <std::size_t R>
  static void prefetch_row(const void* tile, std::size_t stride, std::size_t offset, std::size_t r) {
    prefetch_row_ahead<R>(tile, stride, offset, r);
  }
  static void prefetch(const void* p) { prefetch_line(p); }
};

using Tiles = PaddedBlockTiles<Lanes>;
using Acc = Lanes::Acc;
using Block = Lanes::Block;

// Batch > 1 comes in two shapes. Whole tiles of kPosTile = 8 positions (draft verification,
// prefill) reuse each widened or decoded weight across all 8 positions; the rest of a batch
// (n % 8 positions, so all of a batch under 8) takes the shared register tiles (Lanes says
// their sizes), which widen or decode each weight once per 2 (dense) or 4 (MXFP4) positions
// but keep everything in registers, and are faster when there are fewer than 8 positions to
// share the cost.
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
      y[b * ys + r] = static_cast<float>(Lanes::reduce_tree(Acc{a[0], a[1]}));
    }
}

/// Calls chunk(r0, r1, p, c0, c1) over rows [begin, end) in passes [r0, r1) of
/// kChunkPassRows rows; within a pass, for each panel of kPosTile positions starting at p
/// (n a multiple of kPosTile), the column chunks [c0, c1) of [0, xs) in increasing order,
/// so every parked accumulator takes its columns in the batch-1 order. After a panel's last
/// chunk, the pass's totals go to y (store_parked).
template <class Chunk>
inline void for_each_pass_chunk(std::size_t begin, std::size_t end, std::size_t n, std::size_t xs, const Parked& park,
                                float* y, std::size_t ys, Chunk&& chunk) {
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
                        __m256d* park, const typename W::T* pass, std::size_t stride, std::size_t row, std::size_t c0) {
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
void dense_position_passes(const typename W::T* w, std::size_t cols, std::size_t begin, std::size_t end, std::size_t n,
                           const double* xw, std::size_t xs, float* y, std::size_t ys) {
  alignas(64) Parked park;
  const std::size_t stride = cols * sizeof(typename W::T);
  const std::size_t full = cols / 8 * 8;  // columns in whole blocks
  for_each_pass_chunk(begin, end, n, xs, park, y, ys,
                      [&](std::size_t r0, std::size_t r1, std::size_t p, std::size_t c0, std::size_t c1) {
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
        Tiles::copy_tail(row + full, cols - full, wt);
        for (std::size_t h = 0; h < 2; ++h)
          direct_half<W>(wt, h, 1, panel + full * kPosTile + 4 * h, false, pr + h, nullptr, 0, 0, 0);
      }
    }
  });
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
  const std::size_t pstride = mxfp4_packed_stride(cols);
  const std::size_t sstride = mxfp4_scale_stride(cols);
  constexpr std::size_t kGroupBytes = kMxfp4GroupBytes;
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
          prefetch_line(m.scales + (r0 + kChunkPassRows) * sstride + line);
      }
      const std::uint8_t* p = prow + g * kGroupBytes;
      std::uint8_t bytes[kGroupBytes] = {};
      if (g >= full) {
        // The row's last, partial group, zero-padded (mxfp4_partial_group): its padding is
        // code 0 (+0) times the panel's +0.
        mxfp4_partial_group(p, cols - full * kMxfp4Group, bytes);
        p = bytes;
      }
      const __m256i table = Lanes::mxfp4_table(srow[g]);
#pragma GCC unroll 4
      for (std::size_t j = 0; j < 4; ++j)
        store_block(out + g * kMxfp4Group + 8 * j, Lanes::mxfp4_decode8(p + 4 * j, table));
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
  for_each_pass_chunk(begin, end, n, xs, park, y, ys,
                      [&](std::size_t r0, std::size_t r1, std::size_t p, std::size_t c0, std::size_t c1) {
    const std::size_t blocks = (c1 - c0) / 8;
    const double* xc = xw + p * xs + c0 * kPosTile;  // block c0 / 8, first position
    for (std::size_t r = r0; r < r1; r += kScratchRows) {
      const std::size_t R = r1 - r < kScratchRows ? r1 - r : kScratchRows;
      mxfp4_decode(m, r, R, c0, c1, scratch, r0);
      __m256d* pr = park + (r - r0) * kPosTile * 2;
      if (R == 3)
        chunk_positions<3>(scratch, blocks, xc, c0 == 0, pr);
      else if (R == 2)
        chunk_positions<2>(scratch, blocks, xc, c0 == 0, pr);
      else
        chunk_positions<1>(scratch, blocks, xc, c0 == 0, pr);
    }
  });
}

/// The ops over the shared tiles, but batch > 1 as said above: whole tiles of 8 positions
/// where there are 8, register tiles for the rest.
struct Avx2 : Tiles {
  static constexpr std::size_t dense_panel(std::size_t batch) {
    return batch >= kPosTile ? kPosTile : Lanes::kDensePositions;
  }

  template <class W>
  static void dense_positions(const typename W::T* w, std::size_t rows, std::size_t cols, RowRange rr, const float* x,
                              std::size_t batch, const double* xw, std::size_t xs, std::size_t p, std::size_t n,
                              float* y) {
    if (batch < kPosTile) return dense_register_tiles<W>(w, rows, cols, rr, xw, xs, p, n, y);
    const std::size_t whole = n / kPosTile * kPosTile;
    if (whole != 0) dense_position_passes<W>(w, cols, rr.begin, rr.end, whole, xw, xs, y + p * rows, rows);
    if (whole == n) return;
    // The rest, widened again in panels of the register tiles (xw is no longer needed).
    const double* xr = widened_panels(x + (p + whole) * cols, n - whole, cols, xs, Lanes::kDensePositions);
    if (xr != nullptr)
      dense_register_tiles<W>(w, rows, cols, rr, xr, xs, p + whole, n - whole, y);
    else
      dense_each_position<W>(w, rows, cols, rr, x, p + whole, n - whole, y);
  }

  static constexpr std::size_t mxfp4_panel(std::size_t batch) {
    return batch >= kPosTile ? kPosTile : Lanes::kMxfp4Positions;
  }

  static void mxfp4_positions(const Mxfp4Matrix& m, RowRange rr, const float* x, std::size_t batch, const double* xw,
                              std::size_t xs, std::size_t p, std::size_t n, float* y) {
    if (batch < kPosTile) return mxfp4_register_tiles(m, rr, xw, xs, p, n, y);
    const std::size_t whole = n / kPosTile * kPosTile;
    if (whole != 0) mxfp4_position_passes(m, rr.begin, rr.end, whole, xw, xs, y + p * m.rows, m.rows);
    if (whole == n) return;
    // The rest, widened again in panels of the register tiles (xw is no longer needed).
    const double* xr = widened_panels(x + (p + whole) * m.cols, n - whole, m.cols, xs, Lanes::kMxfp4Positions);
    if (xr != nullptr)
      mxfp4_register_tiles(m, rr, xr, xs, p + whole, n - whole, y);
    else
      mxfp4_each_position(m, rr, x, p + whole, n - whole, y);
  }
};

}  // namespace

const OpTable ops = SimdOps<Avx2>::table;

}  // namespace k3::kernels::avx2
