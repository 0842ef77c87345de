// One cached block of the tiered backend, as a file in the tier directory.
//
// Layout: a header, then the block's bytes.
//   magic "K3TIER02" | u64 file size | u64 block index | u64 length | u64 file version tag
//   | u64 page bytes | u64 xxh3-64 of each page of the block (ceil(length / page bytes) of
//   them) | u64 xxh3-64 of the header up to here
// The version tag names the revision of the file the block came from (version_tag()): the
// inner backend's validator (the http ETag or Last-Modified) or, when it gives none, a hash
// of a few sampled bytes of the file. A block is written under a temporary name
// (".<name>.tmp.<pid>.<n>") and renamed into place only when complete, so a reader never
// sees a half-written block under its final name. Every serve reads the header and the pages
// it copies from and checks them first (a page, not the whole block: a small read costs a
// small check), so a block torn by a crash (rename without fsync) or changed on disk since it
// was written is dropped and fetched again, never served. The directory is the index: a
// listing rebuilds it after kill -9.
#pragma once
#include <xxhash.h>
// The x86 dispatch entry points (AVX2/AVX-512 at run time; the same bits as plain XXH3):
// every page served is hashed, so its speed matters.
#if (defined(__x86_64__) || defined(__i386__)) && __has_include(<xxh_x86dispatch.h>)
#include <xxh_x86dispatch.h>
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace k3::storage::tiered {

inline constexpr char kMagic[8] = {'K', '3', 'T', 'I', 'E', 'R', '0', '2'};
inline constexpr std::size_t kFixedBytes = 48;  ///< magic and the five u64 fields
inline constexpr std::uint64_t kPageBytes = std::uint64_t{64} << 10;

struct BlockHeader {
  std::uint64_t file_size = 0;
  std::uint64_t index = 0;
  std::uint64_t length = 0;
  std::uint64_t version = 0;  ///< the file's version tag (version_tag())
  std::uint64_t page_bytes = kPageBytes;
  std::vector<std::uint64_t> pages;  ///< xxh3-64 of each page of the block
};

/// The pages of a block of `length` bytes.
inline std::uint64_t page_count(std::uint64_t length, std::uint64_t page_bytes = kPageBytes) noexcept {
  return (length + page_bytes - 1) / page_bytes;
}
/// The header's size for a block of `length` bytes (the data starts there).
inline std::uint64_t header_bytes(std::uint64_t length) noexcept { return kFixedBytes + 8 * page_count(length) + 8; }

inline std::uint64_t hash(const void* p, std::uint64_t n) noexcept {
  return XXH3_64bits(p, static_cast<std::size_t>(n));
}

/// The header of block bytes `data` (its page checksums computed).
inline std::vector<std::byte> encode(std::uint64_t file_size, std::uint64_t index, std::uint64_t version,
                                     std::span<const std::byte> data) {
  const std::uint64_t n = page_count(data.size());
  std::vector<std::byte> out(static_cast<std::size_t>(header_bytes(data.size())));
  std::memcpy(out.data(), kMagic, 8);
  const std::uint64_t fields[5] = {file_size, index, data.size(), version, kPageBytes};
  std::memcpy(out.data() + 8, fields, sizeof fields);
  for (std::uint64_t p = 0; p < n; ++p) {
    const std::uint64_t at = p * kPageBytes, len = std::min<std::uint64_t>(kPageBytes, data.size() - at);
    const std::uint64_t h = hash(data.data() + at, len);
    std::memcpy(out.data() + kFixedBytes + 8 * p, &h, 8);
  }
  const std::uint64_t self = hash(out.data(), out.size() - 8);
  std::memcpy(out.data() + out.size() - 8, &self, 8);
  return out;
}

/// The header at the start of `bytes` for a block expected to be `length` bytes, or nothing
/// when the bytes are not a whole, intact header of this version and length.
inline std::optional<BlockHeader> decode(std::span<const std::byte> bytes, std::uint64_t length) noexcept {
  const std::uint64_t size = header_bytes(length);
  if (bytes.size() < size || std::memcmp(bytes.data(), kMagic, 8) != 0) return std::nullopt;
  std::uint64_t self = 0;
  std::memcpy(&self, bytes.data() + size - 8, 8);
  if (self != hash(bytes.data(), size - 8)) return std::nullopt;
  std::uint64_t fields[5];
  std::memcpy(fields, bytes.data() + 8, sizeof fields);
  if (fields[2] != length || fields[4] != kPageBytes) return std::nullopt;
  BlockHeader h{fields[0], fields[1], fields[2], fields[3], fields[4], {}};
  try {
    h.pages.resize(static_cast<std::size_t>(page_count(length)));
  } catch (...) {
    return std::nullopt;
  }
  std::memcpy(h.pages.data(), bytes.data() + kFixedBytes, h.pages.size() * 8);
  return h;
}

/// The version tag of a file: from its validator (`how` = 'v') or from sampled bytes of it
/// (`how` = 's'); never 0 (0 is no tag).
inline std::uint64_t version_tag(char how, std::span<const std::byte> bytes) noexcept {
  const std::uint64_t h = XXH3_64bits_withSeed(bytes.data(), bytes.size(), static_cast<unsigned char>(how));
  return h == 0 ? 1 : h;
}

/// The folder of a file's blocks: a hash of its URI, size and version tag (a URI whose size
/// or version changed is another object and gets other blocks), as 16 hex digits.
inline std::string file_key(std::string_view uri, std::uint64_t size, std::uint64_t version) {
  const std::uint64_t h = XXH3_64bits_withSeed(uri.data(), uri.size(), size ^ (version * 0x9E3779B97F4A7C15ull));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 0; i < 16; ++i) out[static_cast<std::size_t>(i)] = kHex[(h >> (60 - 4 * i)) & 0xF];
  return out;
}

}  // namespace k3::storage::tiered
