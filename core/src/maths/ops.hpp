// The arithmetic the forward pass uses, in one place (docs/model-spec.md §5).
//
// Matrix products go to the kernel set (the plugin owns the partition and tree). Everything
// else is written here once, so it is the same whatever kernel set runs:
//  - reductions (norms, scores, weighted sums) go through dot() (the kernel's fp64 tree) or
//    sum in fp64 in a fixed, documented order;
//  - elementwise functions (σ, SiLU, SiTU, exp, tanh) are evaluated in fp64 from the fp32
//    input and rounded once to fp32.
// Threads split the rows of a matrix product only (never a reduction), so results do not
// depend on the thread count.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include <k3/kernels.hpp>

namespace k3::maths {

/// A weight matrix [rows, cols] (row-major): bf16 (uint16 bits) or fp32 elements, as the
/// checkpoint stores it. Products go to the kernel set's matmul of that dtype; both are exact
/// products in the contract's tree, so identical values give identical bits.
struct Matrix {
  const void* w = nullptr;
  std::size_t rows = 0;
  std::size_t cols = 0;
  bool f32 = false;  ///< fp32 elements, else bf16
  [[nodiscard]] std::size_t element_bytes() const noexcept { return f32 ? 4 : 2; }
  /// Rows [first, first+count) as their own matrix.
  [[nodiscard]] Matrix rows_slice(std::size_t first, std::size_t count) const {
    return {static_cast<const std::byte*>(w) + first * cols * element_bytes(), count, cols, f32};
  }
  [[nodiscard]] const std::uint16_t* bf16() const noexcept { return static_cast<const std::uint16_t*>(w); }
  [[nodiscard]] const float* fp32() const noexcept { return static_cast<const float*>(w); }
  /// Row r widened to fp32 (exact) into out[0, cols).
  void row(std::size_t r, float* out) const noexcept;
};

class Ops {
 public:
  /// min_parallel_work: multiply-adds below which work runs on the calling thread
  /// (ModelSettings::min_parallel_work).
  Ops(const sdk::KernelSet& kernels, int threads, std::size_t min_parallel_work)
      : k_(kernels), threads_(threads < 1 ? 1 : threads), min_parallel_work_(min_parallel_work) {}

  [[nodiscard]] const sdk::KernelSet& kernels() const noexcept { return k_; }
  [[nodiscard]] int threads() const noexcept { return threads_; }
  /// The threads for `items` independent items of `work` multiply-adds in all: 1 for a
  /// single item or below min_parallel_work, else up to threads(), never more than the items.
  [[nodiscard]] int threads_for(std::size_t items, std::size_t work) const noexcept;

  /// Y[b, :] = W · X[b, :] for b < batch. X [batch, cols], Y [batch, rows].
  void matmul(const Matrix& w, const float* x, std::size_t batch, float* y) const;
  void matmul(const sdk::Mxfp4Matrix& w, const float* x, std::size_t batch, float* y) const;

  /// The kernel's fp64 tree sum of a·b (unrounded).
  [[nodiscard]] double dot(const float* a, const float* b, std::size_t n) const noexcept { return k_.dot_f32(a, b, n); }

  /// y = w ⊙ x / sqrt(mean(x²) + eps), each element rounded once: float(w·(x·inv)), inv in fp64.
  void rmsnorm(const float* x, const float* w, double eps, std::size_t n, float* y) const noexcept;

 private:
  const sdk::KernelSet& k_;
  int threads_;
  std::size_t min_parallel_work_;
};

// Elementwise functions: fp64 inside, one rounding at the end.
inline double sigmoid64(double x) noexcept { return 1.0 / (1.0 + std::exp(-x)); }
inline float sigmoid(float x) noexcept { return static_cast<float>(sigmoid64(x)); }
inline float silu(float x) noexcept { return static_cast<float>(double{x} * sigmoid64(x)); }
/// SiTU(g, u) = [β1·tanh(g/β1)·σ(g)] · [β2·tanh(u/β2)]; σ sees the uncapped g.
inline float situ(float g, float u, double beta1, double beta2) noexcept {
  const double a = beta1 * std::tanh(double{g} / beta1) * sigmoid64(g);
  const double c = beta2 * std::tanh(double{u} / beta2);
  return static_cast<float>(a * c);
}

/// In-place softmax of `scores` (fp64): subtract the max, exp, sum in index order, divide.
void softmax64(std::span<double> scores) noexcept;

/// bf16 bits → fp32 (exact).
inline float bf16_to_f32(std::uint16_t b) noexcept {
  const std::uint32_t bits = std::uint32_t{b} << 16;
  float f;
  static_assert(sizeof f == sizeof bits);
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace k3::maths
