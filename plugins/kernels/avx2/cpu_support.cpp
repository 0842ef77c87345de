// Can this CPU run the avx2 set? Built with baseline flags: it executes CPUID and XGETBV
// only. A feature counts when the CPU reports it AND the OS saves its register state
// (XCR0), otherwise the first ymm instruction would fault or corrupt state on a context
// switch (ggml's cpu-feats.cpp checks the same pair).
#include <cpuid.h>

#include <cstdint>

#include "avx2_ops.hpp"

namespace k3::kernels::avx2 {
namespace {

constexpr unsigned kLeaf1EcxFma = 1u << 12;
constexpr unsigned kLeaf1EcxOsxsave = 1u << 27;
constexpr unsigned kLeaf1EcxAvx = 1u << 28;
constexpr unsigned kLeaf7EbxAvx2 = 1u << 5;
// XCR0: SSE state (bit 1) and the upper halves of the ymm registers (bit 2).
constexpr std::uint64_t kXcr0AvxState = (1u << 1) | (1u << 2);

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
  if ((read_xcr0() & kXcr0AvxState) != kXcr0AvxState) return false;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  return (b & kLeaf7EbxAvx2) != 0;
}

}  // namespace k3::kernels::avx2
