// The exponent bytes of a bf16-huff block (pack_trunk_codec.hpp): a canonical Huffman code of
// at most 11 bits a symbol, in four interleaved bit streams, decoded with one table lookup
// per up to four symbols (the exponent byte's ~2.7 bits of entropy put about four codes in
// 11 bits). About twice zstd's Huffman decoding speed on these bytes, and a slightly better
// ratio (its code is built for each 128 KiB of exponent bytes).
//
// Section layout (little-endian):
//   128 bytes: the code length (0..11) of symbol s in nibble s (low nibble first; 0: absent)
//   3 × u32:   the byte lengths of streams 0, 1 and 2 (stream 3 takes the rest)
//   4 streams: stream i codes symbols [i·q, (i+1)·q) (q = n/4; stream 3 to n), LSB-first,
//              followed by 8 zero bytes (so a decoder may always load 8 bytes at once).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace k3::io::trunk_codec {

/// Appends the section coding `symbols` to `out`.
void huffman_encode(std::span<const std::uint8_t> symbols, std::vector<std::byte>& out);

/// Decodes sections; its lookup table is reused. One per thread. CodecError for a section
/// that is malformed (bad code lengths, stream lengths, a stream that ends early or runs on).
class HuffmanDecoder {
 public:
  void decode(std::span<const std::byte> section, std::span<std::uint8_t> out);

  struct Entry {
    std::uint32_t symbols = 0;  ///< up to four, first in the low byte
    std::uint8_t count = 0;     ///< 0: no code starts with these bits
    std::uint8_t bits = 0;      ///< consumed by those symbols
  };

 private:
  void build_single(std::span<const std::byte> lengths);
  void build_multi();
  void decode_streams(std::span<const std::byte> section, std::span<std::uint8_t> out, bool multi);
  // Sized once (2048 entries each): decoding allocates nothing after the first block.
  std::vector<Entry> single_;             ///< one symbol an entry
  std::vector<Entry> table_;              ///< up to four symbols an entry
  std::array<std::byte, 128> lengths_{};  ///< the code lengths the tables were built for
  bool single_ok_ = false, multi_ok_ = false;
};

}  // namespace k3::io::trunk_codec
