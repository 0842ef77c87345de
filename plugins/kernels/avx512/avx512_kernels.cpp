// AVX-512 kernels (built with -mavx512f -mavx512bw; runs only after cpu_supported()).
//
// Same partition and tree as the scalar set, lane for lane:
//   One zmm of 8 doubles per output IS the contract's acc[0..7]: element i of a row adds its
//   exact fp64 product into lane i % 8, in blocks of 8 of increasing i. The fused multiply-add
//   rounds exactly like the scalar's add, because every product (bf16/fp32/E2M1·2^k weight
//   times an fp32 activation) is exact in fp64.
//   Tree (reduce_tree): b = lanes 0-3 + lanes 4-7 = (a0+a4, a1+a5, a2+a6, a3+a7);
//   c = (b0+b2, b1+b3); result c0 + c1 = ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
//   A row's last cols % 8 elements go through a lane mask: absent lanes are left untouched.
// Batch 1: several rows run at once (a row tile), each with its own accumulator: one
// activation load serves the whole tile and the tile's independent FMA chains hide the FMA
// latency; the additions within one row are never reordered. Batch > 1: a tile of rows x
// positions (common/position_tiles.hpp): each block of 8 weights is widened or decoded
// once and multiplied into every position of the tile, one zmm accumulator per (row,
// position), with the activations widened to fp64 once per call; each accumulator
// still takes its additions in the batch-1 order. Positions loop inside a row tile, so a
// tile of weights is fetched from memory once for the whole batch.
//
// Every tile software-prefetches ahead in its rows and into the next tile's rows
// (common/row_prefetch.hpp says why).
//
// The ops around these kernels (the row range, batch 1 against batch > 1, the widened
// activations, the op table) are common/simd_ops.hpp's, over `Avx512` at the end.
#include <immintrin.h>

#include <cstring>

#include "../common/mxfp4_groups.hpp"
#include "../common/mxfp4_top32.hpp"
#include "../common/position_tiles.hpp"
#include "../common/row_prefetch.hpp"
#include "../common/simd_ops.hpp"
#include "../common/simd_sets.hpp"
#include "../common/widened_activations.hpp"

namespace k3::kernels::avx512 {
namespace {

using sdk::Mxfp4Matrix;
using sdk::RowRange;

constexpr std::size_t kDenseRowTile = 8;  // 8 FMA chains: two FMA pipes x latency 4
// Batch > 1: a tile of R rows x kPosTile positions, one zmm per (row, position); batch 8 is
// one position tile. Dense: 3 rows (24 FMA chains, 3 widened weight blocks and an
// activation block: 28 of the 32 zmm); MXFP4: 3 rows too, each block of 8 weights decoded
// on its own (decode8), so only 3 decoded blocks live beside the 24 accumulators (see
// mxfp4_pos_groups). The columns run in chunks of kChunkCols inside passes of
// kChunkPassRows rows (for_each_chunked_tile), so a chunk's panel of activations (256 x 8
// doubles, 16 KiB) stays in L1 for every row tile of the pass; without chunks each tile
// streamed the whole panel (up to 448 KiB) from L2, 512 bytes per 16 FMAs in a 2 x 8 tile.
// Measured on a 2-vCPU Xeon with AVX-512 (docs/benchmarks-log.md, "Batch of 8 positions on an
// AVX-512 Xeon"), batch 8 at 7168x3072 and 3072x7168, alternating with the unchunked 2-row
// tiles before in one process: all of this (with in_register and the shuffle in
// Bf16Weights) takes 0.68-0.85 of their time; 3 dense rows against 2: bf16 0.92-0.94, fp32
// 0.96-0.98; chunks of 128 or 512 columns up to 12% slower than 256 (at 512 the panel chunk
// alone is 32 KiB of the 48 KiB L1); passes of 24 rows within 2% of 12. A batch-8 call
// still costs 0.24-0.27 (fp32) and 0.36-0.41 (bf16) of eight batch-1 calls there. MXFP4
// took 0.50-0.57 with 2-row tiles; the 3-row tiles take 0.92-0.95 of that time, alternated
// call by call in one process, so 0.47-0.49 of eight batch-1 calls there
// (docs/benchmarks-log.md, "MXFP4 batch-N tiles of 3 rows on the AVX-512 Xeon"). Its FMAs alone
// are 0.24-0.35 of eight batch-1 calls, and its decode (2 vector instructions per 8
// weights, on the FMA pipes) adds a quarter to them. The avx2 set's fp64 scratch (decode a
// chunk of 3 rows once, then FMAs over it) was no faster here: the decode already happens
// once per weight for all 8 positions, and a separate decode pass exposed its loads.
constexpr std::size_t kPosRowTile = 3;       // MXFP4
constexpr std::size_t kDensePosRowTile = 3;  // bf16, fp32
constexpr std::size_t kPosTile = 8;
constexpr std::size_t kChunkCols = 256;     // a multiple of the MXFP4 group (32)
constexpr std::size_t kChunkPassRows = 12;  // whole tiles of 3 rows

/// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)) over the lanes of one accumulator.
inline double reduce_tree(__m512d acc) {
  const __m256d b = _mm256_add_pd(_mm512_castpd512_pd256(acc), _mm512_extractf64x4_pd(acc, 1));
  const __m128d c = _mm_add_pd(_mm256_castpd256_pd128(b), _mm256_extractf128_pd(b, 1));
  return _mm_cvtsd_f64(_mm_add_sd(c, _mm_unpackhi_pd(c, c)));
}

/// Makes the compiler load v into a register here. Without it GCC 12 folds the load into
/// every FMA that uses v (one 64-byte load per FMA in a 3 x 8 tile, where 8 per 24 do),
/// and the core's two 512-bit load ports become as busy as its two FMA pipes.
inline void in_register(__m512d& v) { asm("" : "+v"(v)); }

inline __mmask8 lanes_below(std::size_t k) { return static_cast<__mmask8>((1u << k) - 1u); }

/// The first k (< 8) floats at p widened to doubles; lanes >= k are 0 and never read past p+k.
inline __m512d load_f32_tail(const float* p, std::size_t k) {
  return _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << k) - 1u), p)));
}

// Weight loaders: 8 consecutive weights of a row as exact doubles.
struct Bf16Weights {
  using T = std::uint16_t;
  // bf16 -> fp32 is bits << 16. The 8 weights are broadcast to both 128-bit lanes (a load,
  // no ALU uop) and one byte shuffle puts weights 0-3 (low lane) and 4-7 (high lane) into
  // the high halves of zeroed dwords: one shuffle where zero-extend and shift took two.
  static __m512d load8(const T* p) {
    const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i to_high_halves = _mm256_setr_epi8(-128, -128, 0, 1, -128, -128, 2, 3, -128, -128, 4, 5, -128, -128, 6,
                                                    7, -128, -128, 8, 9, -128, -128, 10, 11, -128, -128, 12, 13, -128,
                                                    -128, 14, 15);
    return _mm512_cvtps_pd(_mm256_castsi256_ps(_mm256_shuffle_epi8(both, to_high_halves)));
  }
  static __m512d load_tail(const T* p, std::size_t k) {
    const __m128i raw = _mm512_castsi512_si128(_mm512_maskz_loadu_epi16(static_cast<__mmask32>((1u << k) - 1u), p));
    return _mm512_cvtps_pd(_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16)));
  }
};

struct F32Weights {
  using T = float;
  static __m512d load8(const T* p) { return _mm512_cvtps_pd(_mm256_loadu_ps(p)); }
  static __m512d load_tail(const T* p, std::size_t k) { return load_f32_tail(p, k); }
};

/// y[r] = row r of w · x for the R rows starting at w (row stride cols).
template <class W, std::size_t R>
inline void dense_rows(const typename W::T* w, std::size_t cols, const float* x, float* y) {
  constexpr std::size_t kLineElems = kCacheLine / sizeof(typename W::T);
  const std::size_t stride = cols * sizeof(typename W::T);
  __m512d acc[R];
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r) acc[r] = _mm512_setzero_pd();
  std::size_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    if (c % kLineElems == 0) {
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r) prefetch_row_ahead<R>(w, stride, c * sizeof(typename W::T), r);
    }
    const __m512d xv = _mm512_cvtps_pd(_mm256_loadu_ps(x + c));
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r) acc[r] = _mm512_fmadd_pd(W::load8(w + r * cols + c), xv, acc[r]);
  }
  if (c < cols) {
    const std::size_t k = cols - c;
    const __m512d xv = load_f32_tail(x + c, k);
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r)
      acc[r] = _mm512_mask3_fmadd_pd(W::load_tail(w + r * cols + c, k), xv, acc[r], lanes_below(k));
  }
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r) y[r] = static_cast<float>(reduce_tree(acc[r]));
}

/// Rows [r, r + R) for every batch row.
template <class W, std::size_t R>
inline void dense_tile(const typename W::T* w, std::size_t rows, std::size_t cols, std::size_t r, const float* x,
                       std::size_t batch, float* y) {
  for (std::size_t b = 0; b < batch; ++b) dense_rows<W, R>(w + r * cols, cols, x + b * cols, y + b * rows + r);
}

/// The last `left` (< R) rows from r, as one tile of exactly that many rows.
template <class W, std::size_t R>
inline void dense_tail(const typename W::T* w, std::size_t rows, std::size_t cols, std::size_t r, std::size_t left,
                       const float* x, std::size_t batch, float* y) {
  if constexpr (R > 1) {
    if (left == R - 1)
      dense_tile<W, R - 1>(w, rows, cols, r, x, batch, y);
    else
      dense_tail<W, R - 1>(w, rows, cols, r, left, x, batch, y);
  }
}

/// Batch-1 kernel over positions [p, p + n).
template <class W>
void dense_each_position(const typename W::T* w, std::size_t rows, std::size_t cols, RowRange rr, const float* x,
                         std::size_t p, std::size_t n, float* y) {
  const float* xp = x + p * cols;
  float* yp = y + p * rows;
  std::size_t r = rr.begin;
  for (; r + kDenseRowTile <= rr.end; r += kDenseRowTile) dense_tile<W, kDenseRowTile>(w, rows, cols, r, xp, n, yp);
  dense_tail<W, kDenseRowTile>(w, rows, cols, r, rr.end - r, xp, n, yp);
}

/// Accumulators of one pass (kChunkPassRows rows x kPosTile positions) between column
/// chunks: a tile at row offset i of its pass keeps (row i + r, position b) at
/// [(i + r) * kPosTile + b].
using Parked = __m512d[kChunkPassRows * kPosTile];

/// Calls tile.operator()<Rt, Bt>(r, p, c0, c1) for tiles covering rows [begin, end) x
/// positions [0, positions) x column chunks [c0, c1) of `cols`: in passes of
/// kChunkPassRows rows; within a pass, positions B at a time (the rest as one narrower
/// tile); for each position tile the chunks in order; within a chunk, rows R at a time
/// (the rest one at a time). So every (row, position) accumulator still sees its columns
/// in increasing order, while one chunk of the panel (kChunkCols x B doubles) serves every
/// row tile of the pass from L1. Chunk ends are multiples of kChunkCols except the last,
/// which is cols (so only the last chunk has a partial block or group).
template <std::size_t R, std::size_t Bt, class Tile>
inline void chunked_rows(Tile& tile, std::size_t r0, std::size_t r1, std::size_t p, std::size_t cols) {
  std::size_t c0 = 0;
  do {
    const std::size_t c1 = cols - c0 <= kChunkCols ? cols : c0 + kChunkCols;
    std::size_t r = r0;
    for (; r + R <= r1; r += R) tile.template operator()<R, Bt>(r, p, c0, c1);
    for (; r < r1; ++r) tile.template operator()<1, Bt>(r, p, c0, c1);
    c0 = c1;
  } while (c0 < cols);
}

template <std::size_t R, std::size_t B, class Tile>
inline void chunked_positions_left(Tile& tile, std::size_t r0, std::size_t r1, std::size_t p, std::size_t left,
                                   std::size_t cols) {
  if constexpr (B > 1) {
    if (left == B - 1)
      chunked_rows<R, B - 1>(tile, r0, r1, p, cols);
    else
      chunked_positions_left<R, B - 1>(tile, r0, r1, p, left, cols);
  }
}

template <std::size_t R, std::size_t B, class Tile>
inline void for_each_chunked_tile(std::size_t begin, std::size_t end, std::size_t positions, std::size_t cols,
                                  Tile&& tile) {
  for (std::size_t r0 = begin; r0 < end; r0 += kChunkPassRows) {
    const std::size_t r1 = end - r0 < kChunkPassRows ? end : r0 + kChunkPassRows;
    std::size_t p = 0;
    for (; p + B <= positions; p += B) chunked_rows<R, B>(tile, r0, r1, p, cols);
    if (p < positions) chunked_positions_left<R, B>(tile, r0, r1, p, positions - p, cols);
  }
}

/// Column blocks [c0, c1) (multiples of 8) of rows [0, R) of w x the B positions of panel
/// `xp` (position_tiles.hpp): each block of 8 weights of a row is widened once and
/// multiplied into the B positions' accumulators, which come from `park` (or zero, if
/// `fresh`) and go back there. A loop of its own, with nothing after it but the stores, so
/// the compiler keeps all R x B accumulators in registers; never inlined, so that holds
/// whatever its caller grows into (inlined into a larger caller, GCC 12 reloads loop
/// variables from the stack inside the loop of the 3 x 8 tile).
template <class W, std::size_t R, std::size_t B>
[[gnu::noinline]] void dense_pos_blocks(const typename W::T* w, std::size_t cols, std::size_t c0, std::size_t c1,
                                        const double* xp, bool fresh, __m512d* park) {
  constexpr std::size_t kLineElems = kCacheLine / sizeof(typename W::T);
  const std::size_t stride = cols * sizeof(typename W::T);
  __m512d acc[R][B];
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (std::size_t b = 0; b < B; ++b) acc[r][b] = fresh ? _mm512_setzero_pd() : park[r * kPosTile + b];
  for (std::size_t c = c0; c < c1; c += 8) {
    if (c % kLineElems == 0) {
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r) prefetch_row_ahead<R>(w, stride, c * sizeof(typename W::T), r);
    }
    __m512d wv[R];
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r) wv[r] = W::load8(w + r * cols + c);
#pragma GCC unroll 8
    for (std::size_t b = 0; b < B; ++b) {
      __m512d xv = _mm512_loadu_pd(panel_block<B>(xp, c / 8, b));
      in_register(xv);
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r) acc[r][b] = _mm512_fmadd_pd(wv[r], xv, acc[r][b]);
    }
  }
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (std::size_t b = 0; b < B; ++b) park[r * kPosTile + b] = acc[r][b];
}

/// Columns [c0, c1) of rows [0, R) of w x the B positions of panel `xp`, the accumulators
/// parked between chunks; at c1 = cols the masked tail block follows and y[b * ys + r]
/// gets (row r, position b).
template <class W, std::size_t R, std::size_t B>
inline void dense_pos_tile(const typename W::T* w, std::size_t cols, std::size_t c0, std::size_t c1, const double* xp,
                           __m512d* park, float* y, std::size_t ys) {
  const std::size_t full = c1 == cols ? cols / 8 * 8 : c1;
  dense_pos_blocks<W, R, B>(w, cols, c0, full, xp, c0 == 0, park);
  if (c1 != cols) return;
  if (full < cols) {  // lanes past the last column masked off, as in batch 1
    const std::size_t k = cols - full;
    for (std::size_t r = 0; r < R; ++r) {
      const __m512d wv = W::load_tail(w + r * cols + full, k);
      for (std::size_t b = 0; b < B; ++b) {
        const __m512d xv = _mm512_loadu_pd(panel_block<B>(xp, full / 8, b));
        __m512d& acc = park[r * kPosTile + b];
        acc = _mm512_mask3_fmadd_pd(wv, xv, acc, lanes_below(k));
      }
    }
  }
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t b = 0; b < B; ++b) y[b * ys + r] = static_cast<float>(reduce_tree(park[r * kPosTile + b]));
}

// MXFP4. Every weight E2M1[code]·2^(s-127) is a double whose mantissa has at most its top
// bit set, so its low 32 bits are zero and its top 32 bits say everything. For each scale
// byte s the top halves of the 16 possible weights (codes 0-7, then their negatives 8-15;
// s = 255 gives ±0, as in the scalar set) are one 64-byte table, computed at compile time
// by common/mxfp4_top32.hpp from the same products as the scalar set.
//
// Decode of 16 weights (one little-endian 64-bit word of 16 codes, low nibble = even column):
//   1. broadcast the word to every qword: dwords (lo, hi) = (codes 0-7, codes 8-15);
//   2. vpsrlvd by (0,0, 4,4, ..., 28,28): dword 2q holds code q, dword 2q+1 code 8+q in
//      its low 4 bits (vpermd ignores the rest);
//   3. vpermd in the group's table: 16 top halves at once;
//   4. qword q shifted left by 32 is weight q (the first 8 weights), and qword q with its low
//      dword cleared is weight 8+q (the next 8).
// Per 8 weights that is half a shift, half a lookup, one shift-or-mask and the FMA: all four
// vector pipes of Zen 5 stay busy, where a two-table vpermi2pd per 8 weights competed with
// the FMA for the same two pipes (docs/benchmarks-log.md, "Kernel sets").
//
// Rows run 8 at a time: 8 independent FMA chains (latency 4) keep the pipes fed. The
// table of a (row, group) is found through a byte offset; the offsets of a tile's next
// kScaleChunk groups are made from the scale bytes with a few vector instructions and kept
// in a small array, so the inner loop addresses them off one pointer.
// Constant-initialised (16 KiB of read-only data): no initialiser runs at dlopen.
constexpr auto kTop32Tables = mxfp4_top32_tables<16>();

constexpr std::size_t kMxfp4RowTile = 8;  // 8 FMA chains; measured: 8 and 10 equal, 6 and 12 slower
constexpr std::size_t kGroupBytes = kMxfp4GroupBytes;
constexpr std::size_t kScaleChunk = 64;  // groups whose table offsets are prepared at once

inline std::uint64_t load_u64(const std::uint8_t* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// 16 consecutive weights as two vectors of 8 doubles.
struct Weights16 {
  __m512d first;   ///< elements 0-7
  __m512d second;  ///< elements 8-15
};

/// The weights of a 64-bit word of 16 codes, looked up in `table` (the top halves for the
/// group's scale).
inline Weights16 decode16(std::uint64_t word, __m512i table) {
  const __m512i counts = _mm512_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20, 20, 24, 24, 28, 28);
  const __m512i idx = _mm512_srlv_epi32(_mm512_set1_epi64(static_cast<long long>(word)), counts);
  const __m512i top = _mm512_permutexvar_epi32(idx, table);
  const __m512i high_dwords = _mm512_set1_epi64(static_cast<long long>(0xFFFFFFFF00000000ull));
  return {_mm512_castsi512_pd(_mm512_slli_epi64(top, 32)), _mm512_castsi512_pd(_mm512_and_si512(top, high_dwords))};
}

/// Byte offsets into kTop32Tables (scale << 6) of `n` (<= kScaleChunk) consecutive scale
/// bytes; reads exactly n bytes.
inline void table_offsets(const std::uint8_t* scales, std::size_t n, std::uint16_t* out) {
  const __mmask64 m = n >= 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1;
  const __m512i bytes = _mm512_maskz_loadu_epi8(m, scales);
  const __m512i lo = _mm512_slli_epi16(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(bytes)), 6);
  const __m512i hi = _mm512_slli_epi16(_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(bytes, 1)), 6);
  _mm512_storeu_si512(out, lo);
  _mm512_storeu_si512(out + 32, hi);
}

/// Activations of one unit of 8 elements, as doubles.
struct F32Activations {
  const float* x;
  __m512d load8(std::size_t c) const { return _mm512_cvtps_pd(_mm256_loadu_ps(x + c)); }
};
struct F64Activations {
  const double* x;
  __m512d load8(std::size_t c) const { return _mm512_loadu_pd(x + c); }
};

inline const char* table_bytes() { return reinterpret_cast<const char*>(kTop32Tables.data()); }

/// y[r] = row r0 + r of m · x for r < R; X reads the activations (fp32 or widened).
template <std::size_t R, class X>
inline void mxfp4_rows(const Mxfp4Matrix& m, std::size_t r0, X x, const float* x32, float* y) {
  const std::size_t cols = m.cols;
  const std::size_t pstride = (cols + 1) / 2;
  const std::size_t sstride = (cols + kMxfp4Group - 1) / kMxfp4Group;
  const std::uint8_t* packed = m.packed + r0 * pstride;
  const std::uint8_t* scales = m.scales + r0 * sstride;
  __m512d acc[R];
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r) acc[r] = _mm512_setzero_pd();

  const std::size_t full_groups = cols / kMxfp4Group;
  alignas(64) std::uint16_t offsets[R][kScaleChunk];
  for (std::size_t g0 = 0; g0 < full_groups; g0 += kScaleChunk) {
    const std::size_t n = full_groups - g0 < kScaleChunk ? full_groups - g0 : kScaleChunk;
    for (std::size_t r = 0; r < R; ++r) table_offsets(scales + r * sstride + g0, n, offsets[r]);
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t g = g0 + k;
      if (g % (kCacheLine / kGroupBytes) == 0) {
#pragma GCC unroll 8
        for (std::size_t r = 0; r < R; ++r) prefetch_row_ahead<R>(packed, pstride, g * kGroupBytes, r);
        // And one line of the next tile's scale bytes (its R scale rows are contiguous):
        // without it, each tile's first table_offsets waited for DRAM, ~20% of the time
        // when the matrix streams from memory.
        const std::size_t line = g / (kCacheLine / kGroupBytes) * kCacheLine;
        if (line < R * sstride) _mm_prefetch(reinterpret_cast<const char*>(scales + R * sstride + line), _MM_HINT_T0);
      }
      __m512i table[R];
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r) table[r] = _mm512_load_si512(table_bytes() + offsets[r][k]);
      const std::uint8_t* pg = packed + g * kGroupBytes;
      // Half h = elements 16h..16h+15 of the group (one 64-bit word per row), for every row
      // of the tile before the next half.
#pragma GCC unroll 2
      for (std::size_t h = 0; h < 2; ++h) {
        const std::size_t c = g * kMxfp4Group + 16 * h;
        const __m512d x0 = x.load8(c);
        const __m512d x1 = x.load8(c + 8);
#pragma GCC unroll 8
        for (std::size_t r = 0; r < R; ++r) {
          const Weights16 w = decode16(load_u64(pg + r * pstride + 8 * h), table[r]);
          acc[r] = _mm512_fmadd_pd(w.first, x0, acc[r]);
          acc[r] = _mm512_fmadd_pd(w.second, x1, acc[r]);
        }
      }
    }
  }

  // A last, partial group (cols % 32 elements): its bytes are copied out so nothing past
  // the row is read; lanes past the last column are masked off (so is the unused high
  // nibble of the last byte for odd cols).
  const std::size_t rem = cols - full_groups * kMxfp4Group;
  if (rem != 0) {
    const std::size_t g = full_groups;
    const float* xg = x32 + g * kMxfp4Group;
    __m512d xv[4];
    __mmask8 lanes[4];
    for (std::size_t k = 0; k < 4; ++k) {
      const std::size_t first = 8 * k;
      const std::size_t n = rem > first ? (rem - first < 8 ? rem - first : 8) : 0;
      lanes[k] = lanes_below(n);
      xv[k] = n == 0 ? _mm512_setzero_pd() : load_f32_tail(xg + first, n);
    }
    for (std::size_t r = 0; r < R; ++r) {
      std::uint8_t bytes[kGroupBytes] = {};
      std::memcpy(bytes, packed + r * pstride + g * kGroupBytes, (rem + 1) / 2);
      const __m512i table = _mm512_load_si512(kTop32Tables[scales[r * sstride + g]].top.data());
      for (std::size_t h = 0; h < 2 && lanes[2 * h] != 0; ++h) {
        const Weights16 w = decode16(load_u64(bytes + 8 * h), table);
        acc[r] = _mm512_mask3_fmadd_pd(w.first, xv[2 * h], acc[r], lanes[2 * h]);
        acc[r] = _mm512_mask3_fmadd_pd(w.second, xv[2 * h + 1], acc[r], lanes[2 * h + 1]);
      }
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
    if (xw != nullptr)
      mxfp4_rows<R>(m, r, F64Activations{xw + b * m.cols}, xb, yb);
    else
      mxfp4_rows<R>(m, r, F32Activations{xb}, xb, yb);
  }
}

/// The last `left` (< R) rows from r, as one tile of exactly that many rows.
template <std::size_t R>
inline void mxfp4_tail(const Mxfp4Matrix& m, std::size_t r, std::size_t left, const float* x, const double* xw,
                       std::size_t batch, float* y) {
  if constexpr (R > 1) {
    if (left == R - 1)
      mxfp4_tile<R - 1>(m, r, x, xw, batch, y);
    else
      mxfp4_tail<R - 1>(m, r, left, x, xw, batch, y);
  }
}

/// Batch-1 kernel over positions [p, p + n).
void mxfp4_each_position(const Mxfp4Matrix& m, RowRange rr, const float* x, std::size_t p, std::size_t n, float* y) {
  const float* xp = x + p * m.cols;
  float* yp = y + p * m.rows;
  const double* xw = widened_activations(xp, n * m.cols);
  std::size_t r = rr.begin;
  for (; r + kMxfp4RowTile <= rr.end; r += kMxfp4RowTile) mxfp4_tile<kMxfp4RowTile>(m, r, xp, xw, n, yp);
  mxfp4_tail<kMxfp4RowTile>(m, r, rr.end - r, xp, xw, n, yp);
}

inline std::uint32_t load_u32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// The 8 weights of a 32-bit word of 8 codes, looked up in the table at `table` (the top
/// halves for the group's scale): the word broadcast to every dword (a load), dword 2q+1
/// shifted right by 4q so its low 4 bits are code q, then one zero-masked vpermd puts top
/// half T[code q] into dword 2q+1 and zero into dword 2q: qword q is weight q. Two vector
/// instructions per 8 weights, as decode16, but no vector outlives its block.
inline __m512d decode8(std::uint32_t word, const char* table) {
  const __m512i counts = _mm512_setr_epi32(0, 0, 0, 4, 0, 8, 0, 12, 0, 16, 0, 20, 0, 24, 0, 28);
  const __m512i idx = _mm512_srlv_epi32(_mm512_set1_epi32(static_cast<int>(word)), counts);
  return _mm512_castsi512_pd(_mm512_maskz_permutexvar_epi32(0xAAAA, idx, _mm512_load_si512(table)));
}

/// Groups [g0, g1) of rows [0, R) of the tile at (packed, scales) x the B positions of
/// panel xp; the accumulators come from `park` (or zero, if `fresh`) and go back there. A
/// loop of its own, with nothing after it but the stores, so the compiler keeps the R x B
/// accumulators in registers (with the tail in the same function, GCC 12 moved and
/// spilled them inside the loop). Each block of 8 weights of a row is decoded once
/// (decode8) and multiplied into the B positions, so a 3 x 8 tile needs 24 accumulators,
/// 3 weight blocks, one activation block and the rows' tables (GCC 12 still spills a few
/// accumulators once per group). With decode16 (two blocks per row at once) 3 rows did not
/// fit: 2 x 8 tiles, which took 1.06-1.09 times as long (docs/benchmarks-log.md).
template <std::size_t R, std::size_t B>
inline void mxfp4_pos_groups(const std::uint8_t* packed, const std::uint8_t* scales, std::size_t pstride,
                             std::size_t sstride, std::size_t g0, std::size_t g1, const double* xp, bool fresh,
                             __m512d* park) {
  __m512d acc[R][B];
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (std::size_t b = 0; b < B; ++b) acc[r][b] = fresh ? _mm512_setzero_pd() : park[r * kPosTile + b];
  for (std::size_t g = g0; g < g1; ++g) {
    if (g % (kCacheLine / kGroupBytes) == 0) {
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r) prefetch_row_ahead<R>(packed, pstride, g * kGroupBytes, r);
      const std::size_t line = g / (kCacheLine / kGroupBytes) * kCacheLine;
      if (line < R * sstride) _mm_prefetch(reinterpret_cast<const char*>(scales + R * sstride + line), _MM_HINT_T0);
    }
    const char* table[R];
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r) table[r] = table_bytes() + std::size_t{scales[r * sstride + g]} * 64;
#pragma GCC unroll 4
    for (std::size_t j = 0; j < 4; ++j) {
      __m512d wv[R];
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r)
        wv[r] = decode8(load_u32(packed + r * pstride + g * kGroupBytes + 4 * j), table[r]);
#pragma GCC unroll 8
      for (std::size_t b = 0; b < B; ++b) {
        __m512d xv = _mm512_loadu_pd(panel_block<B>(xp, 4 * g + j, b));
        in_register(xv);
#pragma GCC unroll 8
        for (std::size_t r = 0; r < R; ++r) acc[r][b] = _mm512_fmadd_pd(wv[r], xv, acc[r][b]);
      }
    }
  }
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (std::size_t b = 0; b < B; ++b) park[r * kPosTile + b] = acc[r][b];
}

/// Rows [r0, r0 + R) x the B positions of panel `xp` (position_tiles.hpp), columns
/// [c0, c1) (c0 a multiple of 32): each 8 weights are decoded once and multiplied into
/// the B positions' accumulators, which start at zero (c0 = 0) or in `park`; at c1 = cols
/// the partial last group follows and y[b * ys + r] gets (row r0 + r, position b), else
/// they go back to `park`.
template <std::size_t R, std::size_t B>
inline void mxfp4_pos_tile(const Mxfp4Matrix& m, std::size_t r0, std::size_t c0, std::size_t c1, const double* xp,
                           __m512d* park, float* y, std::size_t ys) {
  const std::size_t cols = m.cols;
  const std::size_t pstride = (cols + 1) / 2;
  const std::size_t sstride = (cols + kMxfp4Group - 1) / kMxfp4Group;
  const std::uint8_t* packed = m.packed + r0 * pstride;
  const std::uint8_t* scales = m.scales + r0 * sstride;
  const std::size_t full_groups = cols / kMxfp4Group;
  mxfp4_pos_groups<R, B>(packed, scales, pstride, sstride, c0 / kMxfp4Group,
                         c1 == cols ? full_groups : c1 / kMxfp4Group, xp, c0 == 0, park);
  if (c1 != cols) return;

  // A last, partial group: its bytes copied out so nothing past the row is read; lanes past
  // the last column masked off, as in batch 1 (the panel is zero-padded there, so every
  // load is in bounds).
  const std::size_t rem = cols - full_groups * kMxfp4Group;
  if (rem != 0) {
    const std::size_t g = full_groups;
    __mmask8 lanes[4];
    for (std::size_t k = 0; k < 4; ++k) {
      const std::size_t first = 8 * k;
      lanes[k] = lanes_below(rem > first ? (rem - first < 8 ? rem - first : 8) : 0);
    }
    for (std::size_t r = 0; r < R; ++r) {
      std::uint8_t bytes[kGroupBytes] = {};
      std::memcpy(bytes, packed + r * pstride + g * kGroupBytes, (rem + 1) / 2);
      const __m512i table = _mm512_load_si512(kTop32Tables[scales[r * sstride + g]].top.data());
      for (std::size_t h = 0; h < 2 && lanes[2 * h] != 0; ++h) {
        const Weights16 wv = decode16(load_u64(bytes + 8 * h), table);
        for (std::size_t b = 0; b < B; ++b) {
          const __m512d x0 = _mm512_loadu_pd(panel_block<B>(xp, 4 * g + 2 * h, b));
          const __m512d x1 = _mm512_loadu_pd(panel_block<B>(xp, 4 * g + 2 * h + 1, b));
          __m512d& acc = park[r * kPosTile + b];
          acc = _mm512_mask3_fmadd_pd(wv.first, x0, acc, lanes[2 * h]);
          acc = _mm512_mask3_fmadd_pd(wv.second, x1, acc, lanes[2 * h + 1]);
        }
      }
    }
  }
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t b = 0; b < B; ++b) y[b * ys + r] = static_cast<float>(reduce_tree(park[r * kPosTile + b]));
}

/// The ISA-specific code SimdOps (common/simd_ops.hpp) builds the ops from: the kernels
/// above, batch > 1 always in tiles of kPosTile positions (the rest as one narrower tile).
struct Avx512 {
  using Bf16Weights = avx512::Bf16Weights;
  using F32Weights = avx512::F32Weights;

  template <class W>
  static void dense_each_position(const typename W::T* w, std::size_t rows, std::size_t cols, RowRange rr,
                                  const float* x, std::size_t p, std::size_t n, float* y) {
    avx512::dense_each_position<W>(w, rows, cols, rr, x, p, n, y);
  }

  static constexpr std::size_t dense_panel(std::size_t /*batch*/) { return kPosTile; }

  template <class W>
  static void dense_positions(const typename W::T* w, std::size_t rows, std::size_t cols, RowRange rr,
                              const float* /*x*/, std::size_t /*batch*/, const double* xw, std::size_t xs,
                              std::size_t p0, std::size_t n, float* y) {
    alignas(64) Parked park;
    for_each_chunked_tile<kDensePosRowTile, kPosTile>(rr.begin, rr.end, n, cols,
                                                      [&]<std::size_t R, std::size_t B>(std::size_t r, std::size_t p,
                                                                                        std::size_t c0,
                                                                                        std::size_t c1) {
      dense_pos_tile<W, R, B>(w + r * cols, cols, c0, c1, xw + p * xs,
                              park + (r - rr.begin) % kChunkPassRows * kPosTile, y + (p0 + p) * rows + r, rows);
    });
  }

  static void mxfp4_each_position(const Mxfp4Matrix& m, RowRange rr, const float* x, std::size_t p, std::size_t n,
                                  float* y) {
    avx512::mxfp4_each_position(m, rr, x, p, n, y);
  }

  static constexpr std::size_t mxfp4_panel(std::size_t /*batch*/) { return kPosTile; }

  static void mxfp4_positions(const Mxfp4Matrix& m, RowRange rr, const float* /*x*/, std::size_t /*batch*/,
                              const double* xw, std::size_t xs, std::size_t p0, std::size_t n, float* y) {
    alignas(64) Parked park;
    for_each_chunked_tile<kPosRowTile, kPosTile>(rr.begin, rr.end, n, m.cols,
                                                 [&]<std::size_t R, std::size_t B>(std::size_t r, std::size_t p,
                                                                                   std::size_t c0, std::size_t c1) {
      mxfp4_pos_tile<R, B>(m, r, c0, c1, xw + p * xs, park + (r - rr.begin) % kChunkPassRows * kPosTile,
                           y + (p0 + p) * m.rows + r, m.rows);
    });
  }

  // dot_f32: one zmm is the contract's 8 accumulators; the last k < 8 elements masked.
  using Acc = __m512d;
  static void dot_block(__m512d& acc, const float* a, const float* b) {
    acc = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm256_loadu_ps(a)), _mm512_cvtps_pd(_mm256_loadu_ps(b)), acc);
  }
  static void dot_tail(__m512d& acc, const float* a, const float* b, std::size_t k) {
    acc = _mm512_mask3_fmadd_pd(load_f32_tail(a, k), load_f32_tail(b, k), acc, lanes_below(k));
  }
  static double reduce_tree(__m512d acc) { return avx512::reduce_tree(acc); }
};

}  // namespace

const OpTable ops = SimdOps<Avx512>::table;

}  // namespace k3::kernels::avx512
