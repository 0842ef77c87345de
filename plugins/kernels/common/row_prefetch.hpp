// Software prefetch for row tiles of a row-major weight matrix, shared by the SIMD sets.
//
// Why: a kernel that runs R rows at once reads R streams. A K3 row of 7168 bf16 weights is
// only 14 KiB, so every new tile starts R new streams that the hardware prefetcher has to
// discover again; on Zen 5 rows of <= 7168 columns ran ~40% slower per byte than rows of
// 12288 without help. So each tile prefetches a fixed distance ahead in each of its rows,
// and once that runs past the row end, the same distance into the same row of the next tile,
// so the next tile starts with its data on the way. Prefetches never fault, so running past
// the end of the matrix is harmless. The builtin is `prefetcht0` on x86-64 (baseline SSE);
// the neon set does not call it (it has not been measured there).
#pragma once
#include <cstddef>
#include <cstdint>

namespace k3::kernels {

inline constexpr std::size_t kCacheLine = 64;
inline constexpr std::size_t kPrefetchBytes = 1024;  // per row stream; 512..4096 measured, 1 KiB best

/// Fetches the cache line at p into every cache level, for reading.
inline void prefetch_line(const void* p) { __builtin_prefetch(p, 0, 3); }

/// Prefetches byte `offset + kPrefetchBytes` of row r of the R-row tile at `tile` (rows
/// `stride` bytes apart), continuing into the next tile's row r past the row end.
template <std::size_t R>
inline void prefetch_row_ahead(const void* tile, std::size_t stride, std::size_t offset, std::size_t r) {
  const auto* base = static_cast<const std::uint8_t*>(tile);
  const std::size_t ahead = offset + kPrefetchBytes;
  const std::uint8_t* p = ahead < stride ? base + r * stride + ahead : base + (R + r) * stride + (ahead - stride);
  prefetch_line(p);
}

}  // namespace k3::kernels
