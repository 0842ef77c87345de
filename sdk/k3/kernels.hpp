// k3host plugin SDK: kernel sets — the hot numeric loops. \since ABI 1
//
// Every set computes bit-identical results to the `scalar` set (docs/model-spec.md §5); the scalar
// plugin's source documents the one partition and reduction tree every set reproduces:
//
//   dot over n elements: 8 fp64 accumulators, each starting at +0.0 (so a -0 product never
//   yields a -0 result); element i adds its exact fp64 product into acc[i % 8] in
//   increasing i; then ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
//   A matrix row's dot is rounded once to fp32 (round to nearest even). Bit identity holds
//   in the default FP environment (no FTZ/DAZ) for finite inputs; NaN bits are unspecified.
//
// Products of a bf16 / fp32 / E2M1·2^k weight and an fp32 activation are exact in fp64, so
// a fused multiply-add gives the same bits as multiply-then-add; only the additions round.
//
// Layouts (row-major, rows = outputs, cols = inputs):
//   bf16:  w[r*cols + c] as uint16 bits (fp32 = bits << 16)
//   f32:   w[r*cols + c]
//   mxfp4: packed[r*ceil(cols/2) + c/2], low nibble = even column;
//          scales[r*ceil(cols/32) + c/32]; value = E2M1[code]·2^(scale-127), scale 255 = 0
//          (each weight of that group is ±0; its products are added like any other).
// Matmul: X is [batch, cols] contiguous, Y is [batch, rows] contiguous; only rows in
// [row_begin, row_end) are written. Each output equals the batch-1 result bit for bit.
// The host splits rows over threads; a kernel never splits a reduction.
// Thread-safety: all functions are reentrant.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace k3::sdk {

struct RowRange {
  std::size_t begin = 0;
  std::size_t end = 0;
};

struct Mxfp4Matrix {
  const std::uint8_t* packed = nullptr;  ///< [rows, ceil(cols/2)] u8
  const std::uint8_t* scales = nullptr;  ///< [rows, ceil(cols/32)] u8
  std::size_t rows = 0;
  std::size_t cols = 0;
};

class __attribute__((visibility("default"))) KernelSet {
 public:
  virtual ~KernelSet() = default;
  /// Short name of the set, e.g. "scalar", "avx2".
  [[nodiscard]] virtual std::string_view name() const noexcept = 0;
  /// Y[b, r] = Σ_c W[r, c]·X[b, c], W bf16 [rows, cols].
  virtual void matmul_bf16(const std::uint16_t* w, std::size_t rows, std::size_t cols, RowRange range, const float* x,
                           std::size_t batch, float* y) const noexcept = 0;
  /// Same with W fp32 [rows, cols].
  virtual void matmul_f32(const float* w, std::size_t rows, std::size_t cols, RowRange range, const float* x,
                          std::size_t batch, float* y) const noexcept = 0;
  /// Same with W MXFP4, straight from the packed nibbles.
  virtual void matmul_mxfp4(const Mxfp4Matrix& w, RowRange range, const float* x, std::size_t batch,
                            float* y) const noexcept = 0;
  /// Σ a[i]·b[i] in the contract's partition and tree, returned unrounded (fp64).
  /// Used for norms (a == b), attention scores and state updates.
  [[nodiscard]] virtual double dot_f32(const float* a, const float* b, std::size_t n) const noexcept = 0;
};

}  // namespace k3::sdk
