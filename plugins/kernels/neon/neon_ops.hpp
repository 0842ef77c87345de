// The neon set's op table: the one place that says which function implements each op.
// The functions live in neon_kernels.cpp. Advanced SIMD (NEON) with fp64 lanes and FMA is
// part of the AArch64 baseline, so no target flags are needed; the score still asks the OS
// (HWCAP_ASIMD) rather than assuming it.
#pragma once
#include <cstddef>
#include <cstdint>

#include <k3/kernels.hpp>

#include "../common/op_table.hpp"

namespace k3::kernels::neon {

using Ops = OpTable;

/// Constant-initialised (no dynamic initialiser); call only after cpu_supported().
extern const Ops ops;

/// The kernel reports Advanced SIMD (AT_HWCAP & HWCAP_ASIMD).
bool cpu_supported() noexcept;

}  // namespace k3::kernels::neon
