// Can this CPU run the avx512 set? Built with baseline flags: it executes CPUID and XGETBV
// only. A feature counts when the CPU reports it AND the OS saves its register state
// (XCR0), otherwise the first zmm instruction would fault or corrupt state on a context
// switch (ggml's cpu-feats.cpp checks the same pair).
#include <cpuid.h>

#include <cstdint>

#include "avx512_ops.hpp"

namespace k3::kernels::avx512 {
namespace {

constexpr unsigned kLeaf1EcxFma = 1u << 12;
constexpr unsigned kLeaf1EcxOsxsave = 1u << 27;
constexpr unsigned kLeaf1EcxAvx = 1u << 28;
constexpr unsigned kLeaf7EbxAvx2 = 1u << 5;
constexpr unsigned kLeaf7EbxAvx512f = 1u << 16;
constexpr unsigned kLeaf7EbxAvx512bw = 1u << 30;
// XCR0: SSE (1), AVX upper halves (2), opmask (5), ZMM0-15 upper halves (6), ZMM16-31 (7).
constexpr std::uint64_t kXcr0Avx512State = (1u << 1) | (1u << 2) | (1u << 5) | (1u << 6) | (1u << 7);

std::uint64_t read_xcr0() noexcept {
  std::uint32_t lo = 0;
  std::uint32_t hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

}  // namespace

bool cpu_supported() noexcept {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
  const unsigned need1 = kLeaf1EcxFma | kLeaf1EcxOsxsave | kLeaf1EcxAvx;
  if ((c & need1) != need1) return false;
  // XGETBV is only defined once OSXSAVE says the OS enabled it.
  if ((read_xcr0() & kXcr0Avx512State) != kXcr0Avx512State) return false;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  const unsigned need7 = kLeaf7EbxAvx2 | kLeaf7EbxAvx512f | kLeaf7EbxAvx512bw;
  return (b & need7) == need7;
}

}  // namespace k3::kernels::avx512
