// MXFP4 groups as the SIMD sets walk them (the layout: sdk/k3/kernels.hpp): 32 weights
// share a scale byte and fill 16 bytes of packed nibbles, low nibble = even column.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace k3::kernels {

inline constexpr std::size_t kMxfp4Group = 32;                    // weights per scale byte
inline constexpr std::size_t kMxfp4GroupBytes = kMxfp4Group / 2;  // their packed bytes

/// Bytes of packed nibbles per row of a matrix of `cols` columns.
inline constexpr std::size_t mxfp4_packed_stride(std::size_t cols) noexcept { return (cols + 1) / 2; }

/// Scale bytes per row of a matrix of `cols` columns.
inline constexpr std::size_t mxfp4_scale_stride(std::size_t cols) noexcept {
  return (cols + kMxfp4Group - 1) / kMxfp4Group;
}

/// A row's last, partial group of `rem` (< 32) columns at p, copied into `bytes` (all zero
/// before), so that nothing past the row is read and every padded element is code 0 (+0);
/// for odd `rem` the unused high nibble of the last byte is cleared too.
inline void mxfp4_partial_group(const std::uint8_t* p, std::size_t rem, std::uint8_t (&bytes)[kMxfp4GroupBytes]) {
  std::memcpy(bytes, p, (rem + 1) / 2);
  if (rem % 2 != 0) bytes[rem / 2] &= 0x0F;
}

}  // namespace k3::kernels
