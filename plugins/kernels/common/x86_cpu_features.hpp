// Which x86-64 SIMD levels this CPU *and* its OS support, for the avx2 and avx512 sets'
// score() and factory. Header-only; include it only from a translation unit built with
// baseline flags (each set's cpu_support.cpp): it executes CPUID and XGETBV only, so the
// check itself runs on any x86-64 CPU (tests/cmake/kernels_baseline_isa.cmake verifies).
//
// A feature counts when the CPU reports it AND the OS saves its register state (XCR0),
// otherwise the first ymm/zmm instruction would fault or corrupt state on a context switch
// (ggml's cpu-feats.cpp checks the same pair).
#pragma once
#if !defined(__x86_64__)
#error "x86_cpu_features.hpp is for the x86-64 kernel sets only"
#endif
#include <cpuid.h>

#include <cstdint>

namespace k3::kernels::x86 {

namespace bits {
inline constexpr unsigned kLeaf1EcxFma = 1u << 12;
inline constexpr unsigned kLeaf1EcxOsxsave = 1u << 27;
inline constexpr unsigned kLeaf1EcxAvx = 1u << 28;
inline constexpr unsigned kLeaf7EbxAvx2 = 1u << 5;
inline constexpr unsigned kLeaf7EbxAvx512f = 1u << 16;
inline constexpr unsigned kLeaf7EbxAvx512bw = 1u << 30;
// XCR0: SSE state (1) and the upper halves of the ymm registers (2) ...
inline constexpr std::uint64_t kXcr0AvxState = (1u << 1) | (1u << 2);
// ... plus opmask (5), ZMM0-15 upper halves (6) and ZMM16-31 (7).
inline constexpr std::uint64_t kXcr0Avx512State = kXcr0AvxState | (1u << 5) | (1u << 6) | (1u << 7);
}  // namespace bits

inline std::uint64_t read_xcr0() noexcept {
  std::uint32_t lo = 0;
  std::uint32_t hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

/// True when CPUID leaf 1 reports AVX, FMA and OSXSAVE, XCR0 holds every bit of
/// `xcr0_state`, and CPUID leaf 7 reports every bit of `leaf7_ebx`.
inline bool cpu_and_os_support(unsigned leaf7_ebx, std::uint64_t xcr0_state) noexcept {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
  const unsigned need1 = bits::kLeaf1EcxFma | bits::kLeaf1EcxOsxsave | bits::kLeaf1EcxAvx;
  if ((c & need1) != need1) return false;
  // XGETBV is only defined once OSXSAVE says the OS enabled it.
  if ((read_xcr0() & xcr0_state) != xcr0_state) return false;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  return (b & leaf7_ebx) == leaf7_ebx;
}

/// AVX, AVX2 and FMA, with the ymm state saved by the OS.
inline bool has_avx2_fma() noexcept { return cpu_and_os_support(bits::kLeaf7EbxAvx2, bits::kXcr0AvxState); }

/// has_avx2_fma() plus AVX-512F and AVX-512BW, with the opmask and zmm state saved.
inline bool has_avx512f_bw() noexcept {
  return cpu_and_os_support(bits::kLeaf7EbxAvx2 | bits::kLeaf7EbxAvx512f | bits::kLeaf7EbxAvx512bw,
                            bits::kXcr0Avx512State);
}

}  // namespace k3::kernels::x86
