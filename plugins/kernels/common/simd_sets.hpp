// The two entry points of each SIMD kernel set, declared once for all of them. A set's op
// table is defined in its one ISA-flagged translation unit (`<set>_kernels.cpp`, over
// simd_ops.hpp); its CPU check in `cpu_support.cpp`, built with baseline flags, so loading
// the library and asking for its score never executes an instruction of the set's ISA.
// Declarations only: nothing here is compiled twice with different target flags.
#pragma once
#include "op_table.hpp"

namespace k3::kernels {

namespace avx2 {
/// Constant-initialised (no dynamic initialiser); call only after cpu_supported().
extern const OpTable ops;
/// CPUID and XCR0 both confirm AVX2 and FMA.
bool cpu_supported() noexcept;
}  // namespace avx2

namespace avx512 {
/// Constant-initialised; call only after cpu_supported().
extern const OpTable ops;
/// CPUID and XCR0 confirm AVX2, FMA, AVX-512F and AVX-512BW with the zmm and opmask state.
bool cpu_supported() noexcept;
}  // namespace avx512

namespace neon {
/// Constant-initialised. Advanced SIMD (NEON) with fp64 lanes and FMA is part of the
/// AArch64 baseline, so the set needs no target flags.
extern const OpTable ops;
/// The kernel reports Advanced SIMD (AT_HWCAP & HWCAP_ASIMD): the score asks the OS
/// rather than assuming it.
bool cpu_supported() noexcept;
}  // namespace neon

}  // namespace k3::kernels
