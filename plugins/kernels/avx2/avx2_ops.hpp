// The avx2 set's op table: the one place that says which function implements each op.
// The functions live in avx2_kernels.cpp, the only translation unit built with
// -mavx2 -mfma; everything else in this plugin is baseline x86-64, so loading the
// library and asking for its score never executes an AVX2 or FMA instruction.
#pragma once
#include <cstddef>
#include <cstdint>

#include <k3/kernels.hpp>

#include "../common/op_table.hpp"

namespace k3::kernels::avx2 {

using Ops = OpTable;

/// Constant-initialised (no dynamic initialiser); call only after cpu_supported().
extern const Ops ops;

/// CPUID and XCR0 both confirm AVX2 and FMA. Baseline code only.
bool cpu_supported() noexcept;

}  // namespace k3::kernels::avx2
