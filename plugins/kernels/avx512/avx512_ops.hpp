// The avx512 set's op table: the one place that says which function implements each op.
// The functions live in avx512_kernels.cpp, the only translation unit built with
// -mavx512f -mavx512bw; everything else in this plugin is baseline x86-64, so loading the
// library and asking for its score never executes an AVX-512 instruction.
#pragma once
#include <cstddef>
#include <cstdint>

#include <k3/kernels.hpp>

#include "../common/op_table.hpp"

namespace k3::kernels::avx512 {

using Ops = OpTable;

/// Constant-initialised (no dynamic initialiser); call only after cpu_supported().
extern const Ops ops;

/// CPUID and XCR0 both confirm AVX2, FMA, AVX-512F and AVX-512BW. Baseline code only.
bool cpu_supported() noexcept;

}  // namespace k3::kernels::avx512
