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
// Several rows run at once (independent accumulators) to hide the FMA latency; the additions
// within one row are never reordered. Dense tiles prefetch ahead in their rows and into the
// next tile's (common/row_prefetch.hpp says why). The batch loop sits inside the row tile
// so a tile of weights is fetched from memory once for the whole batch.
#include <immintrin.h>

#include <cstring>

#include "../common/row_prefetch.hpp"
#include "avx2_ops.hpp"

namespace k3::kernels::avx2 {
namespace {

using sdk::Mxfp4Matrix;
using sdk::RowRange;

constexpr std::size_t kRowTile = 4;
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
};

struct F32Weights {
  using T = float;
  static Block load8(const T* p) { return load_f32x8(p); }
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

template <class W>
void matmul_dense(const typename W::T* w, std::size_t rows, std::size_t cols, RowRange range, const float* x,
                  std::size_t batch, float* y) noexcept {
  const RowRange rr = clip(range, rows);
  std::size_t r = rr.begin;
  for (; r + kRowTile <= rr.end; r += kRowTile)
    for (std::size_t b = 0; b < batch; ++b)
      dense_rows<W, kRowTile>(w + r * cols, cols, x + b * cols, y + b * rows + r);
  for (; r < rr.end; ++r)
    for (std::size_t b = 0; b < batch; ++b) dense_rows<W, 1>(w + r * cols, cols, x + b * cols, y + b * rows + r);
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

// MXFP4. Eight codes are one little-endian 32-bit word (low nibble = even column). The word
// is broadcast and lane j shifted left by 28 - 4j, so code j sits in bits 28-31 of lane j:
// bit 31 is its sign, bits 28-30 (shifted down) index the 8 magnitudes with vpermps.
// For scale bytes s <= 252 the magnitudes |E2M1|·2^(s-127) are exact in fp32 (2^-128 and up
// are representable subnormals, 6·2^125 is below FLT_MAX), so the table is scaled once per
// group in fp32; for s = 253, 254 they would overflow fp32, so the unscaled weight is widened
// and multiplied by 2^(s-127) in fp64 (exact). Either way the weight reaching the FMA is the
// exact E2M1[code]·2^(s-127). Scale byte 255 means weight 0 (as in the scalar set): the
// table becomes ±0 and the group's ±0 products are added like any others.
constexpr unsigned kLargestFp32Scale = 252;

struct Mxfp4Consts {
  __m256 magnitudes = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
  __m256i shifts = _mm256_setr_epi32(28, 24, 20, 16, 12, 8, 4, 0);
  __m256i sign_bit = _mm256_set1_epi32(static_cast<int>(0x80000000u));
};

/// The group multiplier in fp32: 2^(s-127) from its bits (s = 0 is the subnormal 2^-127),
/// 0 for s = 255.
inline float group_scale_f32(unsigned s) {
  const std::uint32_t bits = s == 255 ? 0u : s == 0 ? 0x00400000u : s << 23;
  float f = 0;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// 2^(s-127) in fp64 from its bits.
inline double pow2_scale_f64(unsigned s) {
  const std::uint64_t bits = static_cast<std::uint64_t>(s + 896u) << 52;
  double d = 0;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

/// The 8 weights (fp32, sign applied) whose codes are the nibbles of four_bytes.
inline __m256 decode8(const Mxfp4Consts& k, const std::uint8_t* four_bytes, __m256 table) {
  std::uint32_t word = 0;
  std::memcpy(&word, four_bytes, sizeof word);
  const __m256i v = _mm256_sllv_epi32(_mm256_set1_epi32(static_cast<int>(word)), k.shifts);
  const __m256 mag = _mm256_permutevar8x32_ps(table, _mm256_srli_epi32(v, 28));
  return _mm256_xor_ps(mag, _mm256_castsi256_ps(_mm256_and_si256(v, k.sign_bit)));
}

inline Block widen(__m256 w) {
  return {_mm256_cvtps_pd(_mm256_castps256_ps128(w)), _mm256_cvtps_pd(_mm256_extractf128_ps(w, 1))};
}

/// One row's 32-element group (16 bytes at p, activations xg[0..3]) into acc.
inline void mxfp4_group(const Mxfp4Consts& k, const std::uint8_t* p, unsigned s, const Block* xg, Acc& acc) {
  if (s <= kLargestFp32Scale || s == 255) {
    const __m256 table = _mm256_mul_ps(k.magnitudes, _mm256_set1_ps(group_scale_f32(s)));
#pragma GCC unroll 4
    for (std::size_t j = 0; j < 4; ++j) fma_block(acc, widen(decode8(k, p + 4 * j, table)), xg[j]);
    return;
  }
  const __m256d scale = _mm256_set1_pd(pow2_scale_f64(s));
  for (std::size_t j = 0; j < 4; ++j) {
    const Block w = widen(decode8(k, p + 4 * j, k.magnitudes));
    fma_block(acc, {_mm256_mul_pd(w.lo, scale), _mm256_mul_pd(w.hi, scale)}, xg[j]);
  }
}

template <std::size_t R>
inline void mxfp4_rows(const Mxfp4Matrix& m, std::size_t r0, const float* x, float* y) {
  const Mxfp4Consts k;
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
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r)
      mxfp4_group(k, packed + r * pstride + g * (kMxfp4Group / 2), scales[r * sstride + g], xv, acc[r]);
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
      mxfp4_group(k, bytes, scales[r * sstride + g], xv, acc[r]);
    }
  }
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r) y[r] = static_cast<float>(reduce_tree(acc[r]));
}

void matmul_mxfp4(const Mxfp4Matrix& m, RowRange range, const float* x, std::size_t batch, float* y) noexcept {
  const RowRange rr = clip(range, m.rows);
  std::size_t r = rr.begin;
  for (; r + kRowTile <= rr.end; r += kRowTile)
    for (std::size_t b = 0; b < batch; ++b) mxfp4_rows<kRowTile>(m, r, x + b * m.cols, y + b * m.rows + r);
  for (; r < rr.end; ++r)
    for (std::size_t b = 0; b < batch; ++b) mxfp4_rows<1>(m, r, x + b * m.cols, y + b * m.rows + r);
}

}  // namespace

const Ops ops = {matmul_bf16, matmul_f32, matmul_mxfp4, dot_f32};

}  // namespace k3::kernels::avx2
