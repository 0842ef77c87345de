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
// Several rows run at once (a row tile), each with its own accumulator: one activation load
// serves the whole tile and the tile's independent FMA chains hide the FMA latency; the
// additions within one row are never reordered. The batch loop sits inside the row tile so
// a tile of weights is fetched from memory once for the whole batch.
//
// Every tile software-prefetches ahead in its rows and into the next tile's rows
// (common/row_prefetch.hpp says why).
#include <immintrin.h>

#include <array>
#include <bit>
#include <cstring>

#include "../common/row_prefetch.hpp"
#include "avx512_ops.hpp"

namespace k3::kernels::avx512 {
namespace {

using sdk::Mxfp4Matrix;
using sdk::RowRange;

constexpr std::size_t kDenseRowTile = 8;  // 8 FMA chains: two FMA pipes x latency 4
constexpr std::size_t kMxfp4RowTile = 4;  // measured: 4, 5 and 6 equal; 8 spills registers
constexpr std::size_t kMxfp4Group = 32;

/// The rows of `range` that exist in a matrix of `rows` rows (an end past it is clipped,
/// as in the scalar set).
inline RowRange clip(RowRange range, std::size_t rows) {
  const std::size_t end = range.end < rows ? range.end : rows;
  return {range.begin < end ? range.begin : end, end};
}

/// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)) over the lanes of one accumulator.
inline double reduce_tree(__m512d acc) {
  const __m256d b = _mm256_add_pd(_mm512_castpd512_pd256(acc), _mm512_extractf64x4_pd(acc, 1));
  const __m128d c = _mm_add_pd(_mm256_castpd256_pd128(b), _mm256_extractf128_pd(b, 1));
  return _mm_cvtsd_f64(_mm_add_sd(c, _mm_unpackhi_pd(c, c)));
}

inline __mmask8 lanes_below(std::size_t k) { return static_cast<__mmask8>((1u << k) - 1u); }

/// The first k (< 8) floats at p widened to doubles; lanes >= k are 0 and never read past p+k.
inline __m512d load_f32_tail(const float* p, std::size_t k) {
  return _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << k) - 1u), p)));
}

// Weight loaders: 8 consecutive weights of a row as exact doubles.
struct Bf16Weights {
  using T = std::uint16_t;
  static __m512d load8(const T* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm512_cvtps_pd(_mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));  // bf16 -> fp32 is bits << 16
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
    if (left == R - 1) dense_tile<W, R - 1>(w, rows, cols, r, x, batch, y);
    else dense_tail<W, R - 1>(w, rows, cols, r, left, x, batch, y);
  }
}

template <class W>
void matmul_dense(const typename W::T* w, std::size_t rows, std::size_t cols, RowRange range, const float* x,
                  std::size_t batch, float* y) noexcept {
  const RowRange rr = clip(range, rows);
  std::size_t r = rr.begin;
  for (; r + kDenseRowTile <= rr.end; r += kDenseRowTile) dense_tile<W, kDenseRowTile>(w, rows, cols, r, x, batch, y);
  dense_tail<W, kDenseRowTile>(w, rows, cols, r, rr.end - r, x, batch, y);
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
  __m512d acc = _mm512_setzero_pd();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    acc = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm256_loadu_ps(a + i)), _mm512_cvtps_pd(_mm256_loadu_ps(b + i)), acc);
  if (i < n) acc = _mm512_mask3_fmadd_pd(load_f32_tail(a + i, n - i), load_f32_tail(b + i, n - i), acc, lanes_below(n - i));
  return reduce_tree(acc);
}

// MXFP4. For each scale byte s the 16 possible weights E2M1[code]·2^(s-127) are a constant
// table (codes 0-7 in `pos`, their negatives 8-15 in `neg`, -0 included; s = 255 gives ±0,
// as in the scalar set), computed at compile time: the products are exact, so they equal the
// scalar's E2M1[code] · mxfp4_scale(s) bit for bit. A group's two table registers are two
// loads; vpermt2pd then picks each element's weight by its 4-bit code (bit 3 chooses the
// register, bits 0-2 the lane). Sixteen codes are one little-endian 64-bit word (low nibble
// = even column); broadcasting it and shifting lane j right by 4j (first 8 codes) or
// 32 + 4j (last 8) leaves code j in lane j's low 4 bits (vpermt2pd ignores the rest).
// The group's ±0 weights of scale 255 are added like any others (so 0·inf gives NaN there
// too).
//
// Throughput (Zen 5, measured): per 8 weights one shift, one two-table permute and one FMA,
// which the FP pipes can overlap; the row tile keeps both tables of every row in registers
// and interleaves the rows' FMA chains 8 weights at a time so the chains overlap.
struct alignas(64) GroupTable {
  std::array<double, 8> pos;
  std::array<double, 8> neg;
};

constexpr GroupTable group_table(unsigned s) {
  constexpr std::array<double, 8> kE2M1 = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  // 2^(s-127) from its bits (a normal double for s <= 254); the scalar set's 0 for s = 255.
  const double scale = s == 255 ? 0.0 : std::bit_cast<double>(static_cast<std::uint64_t>(s + 896u) << 52);
  GroupTable t{};
  for (std::size_t j = 0; j < 8; ++j) {
    t.pos[j] = kE2M1[j] * scale;
    t.neg[j] = -kE2M1[j] * scale;
  }
  return t;
}

constexpr std::array<GroupTable, 256> make_group_tables() {
  std::array<GroupTable, 256> out{};
  for (unsigned s = 0; s < 256; ++s) out[s] = group_table(s);
  return out;
}

// Constant-initialised (32 KiB of read-only data): no initialiser runs at dlopen.
constexpr std::array<GroupTable, 256> kGroupTables = make_group_tables();

inline std::uint64_t load_u64(const std::uint8_t* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// The weights of 8 elements: codes (word >> shift_j) & 15 looked up in a group's table.
inline __m512d decode8(std::uint64_t word, __m512i shifts, __m512d pos, __m512d neg) {
  const __m512i idx = _mm512_srlv_epi64(_mm512_set1_epi64(static_cast<long long>(word)), shifts);
  return _mm512_permutex2var_pd(pos, idx, neg);
}

template <std::size_t R>
inline void mxfp4_rows(const Mxfp4Matrix& m, std::size_t r0, const float* x, float* y) {
  const __m512i shifts[2] = {_mm512_setr_epi64(0, 4, 8, 12, 16, 20, 24, 28),
                             _mm512_setr_epi64(32, 36, 40, 44, 48, 52, 56, 60)};
  const std::size_t cols = m.cols;
  const std::size_t pstride = (cols + 1) / 2;
  const std::size_t sstride = (cols + kMxfp4Group - 1) / kMxfp4Group;
  const std::uint8_t* packed = m.packed + r0 * pstride;
  const std::uint8_t* scales = m.scales + r0 * sstride;
  __m512d acc[R];
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r) acc[r] = _mm512_setzero_pd();

  constexpr std::size_t kGroupBytes = kMxfp4Group / 2;
  const std::size_t full_groups = cols / kMxfp4Group;
  for (std::size_t g = 0; g < full_groups; ++g) {
    if (g % (kCacheLine / kGroupBytes) == 0) {
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r) prefetch_row_ahead<R>(packed, pstride, g * kGroupBytes, r);
    }
    __m512d pos[R];
    __m512d neg[R];
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r) {
      const GroupTable& t = kGroupTables[scales[r * sstride + g]];
      pos[r] = _mm512_load_pd(t.pos.data());
      neg[r] = _mm512_load_pd(t.neg.data());
    }
    const float* xg = x + g * kMxfp4Group;
    const std::uint8_t* pg = packed + g * kGroupBytes;
    // Unit u = elements 8u..8u+7 of the group, for every row of the tile before the next u.
#pragma GCC unroll 4
    for (std::size_t u = 0; u < 4; ++u) {
      const __m512d xv = _mm512_cvtps_pd(_mm256_loadu_ps(xg + 8 * u));
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r) {
        const std::uint64_t word = load_u64(pg + r * pstride + 8 * (u / 2));
        acc[r] = _mm512_fmadd_pd(decode8(word, shifts[u % 2], pos[r], neg[r]), xv, acc[r]);
      }
    }
  }

  // A last, partial group (cols % 32 elements): its bytes are copied out so nothing past
  // the row is read; for odd cols the unused high nibble of the last byte is masked off.
  const std::size_t rem = cols - full_groups * kMxfp4Group;
  if (rem != 0) {
    const std::size_t g = full_groups;
    const float* xg = x + g * kMxfp4Group;
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
      const GroupTable& t = kGroupTables[scales[r * sstride + g]];
      const __m512d pos = _mm512_load_pd(t.pos.data());
      const __m512d neg = _mm512_load_pd(t.neg.data());
      for (std::size_t k = 0; k < 4 && lanes[k] != 0; ++k) {
        const std::uint64_t word = load_u64(bytes + 8 * (k / 2));
        acc[r] = _mm512_mask3_fmadd_pd(decode8(word, shifts[k % 2], pos, neg), xv[k], acc[r], lanes[k]);
      }
    }
  }
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r) y[r] = static_cast<float>(reduce_tree(acc[r]));
}

/// Rows [r, r + R) for every batch row.
template <std::size_t R>
inline void mxfp4_tile(const Mxfp4Matrix& m, std::size_t r, const float* x, std::size_t batch, float* y) {
  for (std::size_t b = 0; b < batch; ++b) mxfp4_rows<R>(m, r, x + b * m.cols, y + b * m.rows + r);
}

/// The last `left` (< R) rows from r, as one tile of exactly that many rows.
template <std::size_t R>
inline void mxfp4_tail(const Mxfp4Matrix& m, std::size_t r, std::size_t left, const float* x, std::size_t batch,
                       float* y) {
  if constexpr (R > 1) {
    if (left == R - 1) mxfp4_tile<R - 1>(m, r, x, batch, y);
    else mxfp4_tail<R - 1>(m, r, left, x, batch, y);
  }
}

void matmul_mxfp4(const Mxfp4Matrix& m, RowRange range, const float* x, std::size_t batch, float* y) noexcept {
  const RowRange rr = clip(range, m.rows);
  std::size_t r = rr.begin;
  for (; r + kMxfp4RowTile <= rr.end; r += kMxfp4RowTile) mxfp4_tile<kMxfp4RowTile>(m, r, x, batch, y);
  mxfp4_tail<kMxfp4RowTile>(m, r, rr.end - r, x, batch, y);
}

}  // namespace

const Ops ops = {matmul_bf16, matmul_f32, matmul_mxfp4, dot_f32};

}  // namespace k3::kernels::avx512
