// Little-endian loads and stores of the integers in our binary formats (the trunk codec's
// stream headers and block tables), byte by byte so they hold on any host and any alignment.
#pragma once
#include <cstddef>
#include <cstdint>

namespace k3::util {

inline std::uint32_t load_le32(const std::byte* p) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | std::to_integer<std::uint32_t>(p[i]);
  return v;
}

inline std::uint64_t load_le64(const std::byte* p) { return std::uint64_t{load_le32(p + 4)} << 32 | load_le32(p); }

inline void store_le32(std::byte* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}

inline void store_le64(std::byte* p, std::uint64_t v) {
  store_le32(p, static_cast<std::uint32_t>(v));
  store_le32(p + 4, static_cast<std::uint32_t>(v >> 32));
}

}  // namespace k3::util
