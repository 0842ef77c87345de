// The neon set's op table: the one place that says which function implements each op.
// The functions live in neon_kernels.cpp. Advanced SIMD (NEON) with fp64 lanes and FMA is
// part of the AArch64 baseline, so no target flags are needed; the score still asks the OS
// (HWCAP_ASIMD) rather than assuming it.
#pragma once
#include <cstddef>
#include <cstdint>

#include <k3/kernels.hpp>

namespace k3::kernels::neon {

struct Ops {
  void (*matmul_bf16)(const std::uint16_t* w, std::size_t rows, std::size_t cols, sdk::RowRange range,
                      const float* x, std::size_t batch, float* y) noexcept;
  void (*matmul_f32)(const float* w, std::size_t rows, std::size_t cols, sdk::RowRange range, const float* x,
                     std::size_t batch, float* y) noexcept;
  void (*matmul_mxfp4)(const sdk::Mxfp4Matrix& w, sdk::RowRange range, const float* x, std::size_t batch,
                       float* y) noexcept;
  double (*dot_f32)(const float* a, const float* b, std::size_t n) noexcept;
};

/// Constant-initialised (no dynamic initialiser); call only after cpu_supported().
extern const Ops ops;

/// The kernel reports Advanced SIMD (AT_HWCAP & HWCAP_ASIMD).
bool cpu_supported() noexcept;

}  // namespace k3::kernels::neon
