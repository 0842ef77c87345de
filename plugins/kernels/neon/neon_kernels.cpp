// NEON kernels (AArch64 Advanced SIMD, fp64 lanes).
//
// The ops, the batch-1 kernels and the tiles of rows x positions are the shared ones of the
// sets that hold 8 doubles as a Block and zero-pad row tails (common/padded_block_tiles.hpp,
// over `Lanes` below; common/simd_ops.hpp); this file holds what is NEON's own:
//   Four float64x2 per output hold the contract's accumulators: a01 = (acc0, acc1),
//   a23 = (acc2, acc3), a45 = (acc4, acc5), a67 = (acc6, acc7). Element i adds its exact
//   fp64 product into acc[i % 8] with vfmaq_f64, which rounds exactly like the scalar's add
//   because every product is exact in fp64.
//   Tree (reduce_tree): b01 = a01 + a45 = (a0+a4, a1+a5); b23 = a23 + a67 = (a2+a6, a3+a7);
//   c = b01 + b23 = ((a0+a4)+(a2+a6), (a1+a5)+(a3+a7)); result c[0] + c[1].
// No software prefetch: it has not been measured on aarch64 (qemu cannot time it).
#include <arm_neon.h>

#include <cstring>

#include "../common/padded_block_tiles.hpp"
#include "../common/simd_ops.hpp"
#include "../common/simd_sets.hpp"

namespace k3::kernels::neon {
namespace {

/// What common/padded_block_tiles.hpp needs of NEON.
struct Lanes {
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

  static constexpr std::size_t kRowTile = 4;  // batch 1: rows at once
  // Batch > 1: register tiles of 1 row x 4 positions, 4 q registers per (row, position): 16
  // accumulators, a block of weights and one position's activations within the 32 q
  // registers; batch 8 is two whole tiles. Chosen by register count (qemu cannot time it).
  static constexpr std::size_t kDenseRows = 1;
  static constexpr std::size_t kDensePositions = 4;
  static constexpr std::size_t kMxfp4Rows = 1;
  static constexpr std::size_t kMxfp4Positions = 4;

  static void fma_block(Acc& a, const Block& w, const Block& x) {
    a.a01 = vfmaq_f64(a.a01, w.v01, x.v01);
    a.a23 = vfmaq_f64(a.a23, w.v23, x.v23);
    a.a45 = vfmaq_f64(a.a45, w.v45, x.v45);
    a.a67 = vfmaq_f64(a.a67, w.v67, x.v67);
  }

  /// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
  static double reduce_tree(const Acc& a) {
    const float64x2_t c = vaddq_f64(vaddq_f64(a.a01, a.a45), vaddq_f64(a.a23, a.a67));
    return vgetq_lane_f64(c, 0) + vgetq_lane_f64(c, 1);
  }

  static Block widen(float32x4_t lo, float32x4_t hi) {
    return {vcvt_f64_f32(vget_low_f32(lo)), vcvt_high_f64_f32(lo), vcvt_f64_f32(vget_low_f32(hi)),
            vcvt_high_f64_f32(hi)};
  }

  static Block load_f32x8(const float* p) { return widen(vld1q_f32(p), vld1q_f32(p + 4)); }

  static Block load_f64x8(const double* p) {
    return {vld1q_f64(p), vld1q_f64(p + 2), vld1q_f64(p + 4), vld1q_f64(p + 6)};
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

  // MXFP4. Per (row, group) the 16 possible weights E2M1[code]·2^(s-127) are built exactly
  // in fp64 (scale byte 255 gives ±0 weights, as in the scalar set); each element's weight
  // is then picked by its code (low nibble = even column).
  struct Mxfp4Table {
    alignas(16) double w[16];
  };

  /// The group's 16 weights for scale byte s: E2M1 times 2^(s-127) (a normal double for
  /// s <= 254, built from its bits), or times 0 for 255.
  static Mxfp4Table mxfp4_table(unsigned s) {
    static constexpr double kE2M1[16] = {0.0,  0.5,  1.0,  1.5,  2.0,  3.0,  4.0,  6.0,
                                         -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0};
    const std::uint64_t bits = s == 255 ? 0 : static_cast<std::uint64_t>(s + 896u) << 52;
    double scale = 0;
    std::memcpy(&scale, &bits, sizeof scale);
    const float64x2_t v = vdupq_n_f64(scale);
    Mxfp4Table t;
    for (std::size_t c = 0; c < 16; c += 2) vst1q_f64(t.w + c, vmulq_f64(vld1q_f64(kE2M1 + c), v));
    return t;
  }

  /// The 8 weights whose codes are the nibbles of four_bytes, picked from the group's table.
  static Block mxfp4_decode8(const std::uint8_t* four_bytes, const Mxfp4Table& t) {
    alignas(16) double w[8];
    for (std::size_t e = 0; e < 4; ++e) {
      const std::uint8_t byte = four_bytes[e];
      w[2 * e] = t.w[byte & 0x0F];
      w[2 * e + 1] = t.w[byte >> 4];
    }
    return load_f64x8(w);
  }

  template <std::size_t R>
  static void prefetch_row(const void* /*tile*/, std::size_t /*stride*/, std::size_t /*offset*/, std::size_t /*r*/) {}
  static void prefetch(const void* /*p*/) {}
};

}  // namespace

const OpTable ops = SimdOps<PaddedBlockTiles<Lanes>>::table;

}  // namespace k3::kernels::neon
