// Activations widened to fp64 once per call, shared by the SIMD sets.
//
// Why: a kernel runs a tile of rows over the whole activation vector, so without this every
// tile converts the same floats to doubles again (vcvtps2pd, which shares the FMA pipes).
// The buffer belongs to the calling thread and only grows. Above kMaxWidened doubles
// (8 MiB), or if it cannot grow, the caller gets null and converts as it goes (or widens
// fewer positions at a time): same bits (fp32 -> fp64 is exact either way), a little slower.
// Compiled in each set's kernel translation unit, so the conversion loop uses that set's
// instructions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace k3::kernels {

inline constexpr std::size_t kMaxWidened = std::size_t{1} << 20;

/// This thread's buffer of at least n doubles (valid until the thread's next call), or
/// null when n > kMaxWidened or the buffer cannot grow. It starts on a cache line, so the
/// kernels' 32- and 64-byte loads of whole blocks never straddle two lines (a split load
/// costs two).
inline double* widened_buffer(std::size_t n) noexcept {
  if (n > kMaxWidened) return nullptr;
  constexpr std::size_t kLineDoubles = 64 / sizeof(double);
  thread_local std::vector<double> buffer;
  try {
    if (buffer.size() < n + kLineDoubles) buffer.resize(n + kLineDoubles);
  } catch (...) {
    return nullptr;
  }
  const auto misalignment = reinterpret_cast<std::uintptr_t>(buffer.data()) % 64 / sizeof(double);
  return buffer.data() + (misalignment == 0 ? 0 : kLineDoubles - misalignment);
}

/// x[0..n) as doubles in this thread's buffer, or null (see widened_buffer).
inline const double* widened_activations(const float* x, std::size_t n) noexcept {
  double* out = widened_buffer(n);
  if (out == nullptr) return nullptr;
  for (std::size_t i = 0; i < n; ++i) out[i] = x[i];
  return out;
}

/// How many positions of `stride` doubles the buffer may hold at once (0 if not even one fits).
inline constexpr std::size_t widened_positions_max(std::size_t stride) noexcept {
  return stride == 0 ? 0 : kMaxWidened / stride;
}

}  // namespace k3::kernels
