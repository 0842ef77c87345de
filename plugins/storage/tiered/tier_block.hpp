// One cached block of the tiered backend, as a file in the tier directory.
//
// Layout: a 56-byte header then the block's bytes.
//   magic "K3TIER02" | u64 file size | u64 block index | u64 length | u64 file version tag
//   | u64 xxh3-64 of the bytes | u64 xxh3-64 of the previous 48 header bytes
// The version tag names the revision of the file the block came from (version_tag()): the
// inner backend's validator (the http ETag or Last-Modified) or, when it gives none, a hash
// of a few sampled bytes of the file. A block is written under a temporary name
// (".<name>.tmp.<pid>.<n>") and renamed into place only when complete, so a reader never
// sees a half-written block under its final name. Every serve reads the whole block and
// checks header and checksum, so a block torn by a crash (rename without fsync) or changed
// on disk since it was written is dropped and fetched again, never served. The directory is
// the index: a listing rebuilds it after kill -9.
#pragma once
#include <xxhash.h>
// The x86 dispatch entry points (AVX2/AVX-512 at run time; the same bits as plain XXH3):
// every block served is hashed, so its speed matters.
#if (defined(__x86_64__) || defined(__i386__)) && __has_include(<xxh_x86dispatch.h>)
#include <xxh_x86dispatch.h>
#endif

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace k3::storage::tiered {

inline constexpr std::array<char, 8> kMagic = {'K', '3', 'T', 'I', 'E', 'R', '0', '2'};
inline constexpr std::size_t kHeaderBytes = 56;

struct BlockHeader {
  std::uint64_t file_size = 0;
  std::uint64_t index = 0;
  std::uint64_t length = 0;
  std::uint64_t version = 0;   ///< the file's version tag (version_tag())
  std::uint64_t checksum = 0;  ///< xxh3-64 of the block's bytes
};

inline std::uint64_t checksum(std::span<const std::byte> bytes) noexcept { return XXH3_64bits(bytes.data(), bytes.size()); }

inline std::array<std::byte, kHeaderBytes> encode(const BlockHeader& h) noexcept {
  std::array<std::byte, kHeaderBytes> out{};
  std::memcpy(out.data(), kMagic.data(), 8);
  const std::uint64_t fields[5] = {h.file_size, h.index, h.length, h.version, h.checksum};
  std::memcpy(out.data() + 8, fields, sizeof fields);
  const std::uint64_t self = XXH3_64bits(out.data(), 48);
  std::memcpy(out.data() + 48, &self, 8);
  return out;
}

/// The header, or nothing when the bytes are not a whole, intact header of this version.
inline std::optional<BlockHeader> decode(std::span<const std::byte> bytes) noexcept {
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic.data(), 8) != 0) return std::nullopt;
  std::uint64_t self = 0;
  std::memcpy(&self, bytes.data() + 48, 8);
  if (self != XXH3_64bits(bytes.data(), 48)) return std::nullopt;
  std::uint64_t fields[5];
  std::memcpy(fields, bytes.data() + 8, sizeof fields);
  return BlockHeader{fields[0], fields[1], fields[2], fields[3], fields[4]};
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
