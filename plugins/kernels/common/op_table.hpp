// The op table every SIMD kernel set fills: one function per KernelSet op, all reproducing
// the scalar partition and tree (sdk/k3/kernels.hpp). Plain function pointers so a set's
// table can be constant-initialised in the one ISA-flagged translation unit.
#pragma once
#include <cstddef>
#include <cstdint>

#include <k3/kernels.hpp>

namespace k3::kernels {

struct OpTable {
  void (*matmul_bf16)(const std::uint16_t* w, std::size_t rows, std::size_t cols, sdk::RowRange range, const float* x,
                      std::size_t batch, float* y) noexcept;
  void (*matmul_f32)(const float* w, std::size_t rows, std::size_t cols, sdk::RowRange range, const float* x,
                     std::size_t batch, float* y) noexcept;
  void (*matmul_mxfp4)(const sdk::Mxfp4Matrix& w, sdk::RowRange range, const float* x, std::size_t batch,
                       float* y) noexcept;
  double (*dot_f32)(const float* a, const float* b, std::size_t n) noexcept;
};

}  // namespace k3::kernels
