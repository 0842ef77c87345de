// The coded trunk's stream codec (io/pack_trunk_codec.hpp) on its own: streams decode to
// exactly the bytes encoded (Gaussian BF16, incompressible bytes, other dtypes, odd sizes,
// read in small pieces), Gaussian BF16 shrinks, and every damaged stream — each byte flipped,
// truncated, with a wrong size — is refused with a CodecError.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include <k3/checkpoint.hpp>
#include <k3/storage.hpp>

#include "io/pack_trunk_codec.hpp"
#include "io/pack_trunk_huffman.hpp"

namespace codec = k3::io::trunk_codec;

namespace {

/// `n` BF16 values drawn from N(0, sigma), rounded to nearest even from fp32.
std::vector<std::byte> gaussian_bf16(std::size_t n, float sigma, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0F, sigma);
  std::vector<std::byte> out(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    const float f = dist(rng);
    std::uint32_t bits = 0;
    std::memcpy(&bits, &f, 4);
    bits += 0x7FFF + ((bits >> 16) & 1);
    out[2 * i] = static_cast<std::byte>(bits >> 16);
    out[2 * i + 1] = static_cast<std::byte>(bits >> 24);
  }
  return out;
}

std::vector<std::byte> random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng());
  return out;
}

std::vector<std::byte> encode(const std::vector<std::byte>& raw, k3::DType dtype, std::uint32_t block = 8192,
                              bool huffman = false) {
  codec::Encoder enc({block, codec::kDefaultLevel, codec::kDefaultMinMatch, huffman});
  std::vector<std::byte> out;
  enc.encode(raw, dtype, out);
  return out;
}

std::vector<std::byte> decode(const std::vector<std::byte>& stream, std::size_t raw_bytes, bool bf16) {
  codec::Decoder dec;
  codec::MemoryInput in(stream);
  std::vector<std::byte> out(raw_bytes);
  const std::uint64_t used = dec.decode(in, out, bf16);
  CHECK(used == stream.size());
  return out;
}

/// A storage file over bytes in memory that counts its reads.
class BytesFile final : public k3::sdk::StorageFile {
 public:
  explicit BytesFile(std::vector<std::byte> bytes) : bytes_(std::move(bytes)) {}
  std::uint64_t size() const noexcept override { return bytes_.size(); }
  std::uint32_t alignment() const noexcept override { return 1; }
  k3::sdk::Status read(std::span<k3::sdk::ReadRequest> batch) noexcept override {
    for (auto& r : batch) {
      if (r.offset > bytes_.size() || r.length > bytes_.size() - r.offset)
        return k3::sdk::Status::error(k3::sdk::StatusCode::short_read, "past the end");
      std::memcpy(r.dest, bytes_.data() + r.offset, r.length);
      ++reads;
    }
    return {};
  }
  std::size_t reads = 0;

 private:
  std::vector<std::byte> bytes_;
};

}  // namespace

TEST_CASE("trunk codec: streams decode to exactly the bytes encoded", "[pack_trunk][codec]") {
  for (const bool huffman : {false, true})
    for (const std::size_t n :
         {std::size_t{1}, std::size_t{7}, std::size_t{4096}, std::size_t{4097}, std::size_t{20000}}) {
      CAPTURE(huffman, n);
      const auto g = gaussian_bf16(n, 0.02F, static_cast<std::uint32_t>(n));
      CHECK(decode(encode(g, k3::DType::bf16, 8192, huffman), g.size(), true) == g);
      const auto r = random_bytes(2 * n, static_cast<std::uint32_t>(n) + 1);  // incompressible: stored blocks
      CHECK(decode(encode(r, k3::DType::bf16, 8192, huffman), r.size(), true) == r);
      // One exponent throughout (a code of one symbol), and a few with lengths up to the limit.
      std::vector<std::byte> flat(2 * n, std::byte{0x3C});
      CHECK(decode(encode(flat, k3::DType::bf16, 8192, huffman), flat.size(), true) == flat);
      std::vector<std::byte> skewed(2 * n);
      for (std::size_t i = 0; i < n; ++i) {  // exponent 120 + trailing zeros of i: counts 1/2, 1/4, ...
        const int e = 120 + (i == 0 ? 20 : __builtin_ctzll(i));
        skewed[2 * i] = static_cast<std::byte>((e & 1) << 7);
        skewed[2 * i + 1] = static_cast<std::byte>(e >> 1);
      }
      CHECK(decode(encode(skewed, k3::DType::bf16, 8192, huffman), skewed.size(), true) == skewed);
      const auto f = random_bytes(4 * n, static_cast<std::uint32_t>(n) + 2);  // F32: stored
      const auto fs = encode(f, k3::DType::f32);
      CHECK(fs.size() >= f.size());
      CHECK(decode(fs, f.size(), false) == f);
    }
  const std::vector<std::byte> empty;
  CHECK(decode(encode(empty, k3::DType::bf16), 0, true).empty());
}

TEST_CASE("trunk codec: Gaussian BF16 shrinks to under three quarters, random bytes grow by the headers only",
          "[pack_trunk][codec]") {
  const auto g = gaussian_bf16(1 << 20, 0.02F, 1);
  const auto coded = encode(g, k3::DType::bf16, codec::kDefaultBlockRaw);
  const double ratio = static_cast<double>(coded.size()) / static_cast<double>(g.size());
  CAPTURE(ratio);
  CHECK(ratio < 0.75);  // the exponent byte's ~3 bits of entropy: about (8 + 3) / 16
  CHECK(ratio > 0.5);   // the sign+mantissa byte is stored as it is
  const auto huff = encode(g, k3::DType::bf16, codec::kDefaultBlockRaw, true);
  const double huff_ratio = static_cast<double>(huff.size()) / static_cast<double>(g.size());
  CAPTURE(huff_ratio);
  CHECK(huff_ratio < 0.75);
  CHECK(huff_ratio > 0.5);
  CHECK(decode(huff, g.size(), true) == g);
  const auto r = random_bytes(1 << 20, 2);
  const auto stored = encode(r, k3::DType::bf16, codec::kDefaultBlockRaw);
  CHECK(stored.size() == r.size() + codec::kHeaderBytes +
                             codec::kEntryBytes * ((r.size() + codec::kDefaultBlockRaw - 1) / codec::kDefaultBlockRaw));
}

TEST_CASE("trunk codec: a stream read from a file in small pieces decodes the same", "[pack_trunk][codec]") {
  const auto g = gaussian_bf16(30000, 1.0F, 3);
  const auto stream = encode(g, k3::DType::bf16);
  std::vector<std::byte> file_bytes(100, std::byte{0x55});  // the stream at an offset
  file_bytes.insert(file_bytes.end(), stream.begin(), stream.end());
  BytesFile file(file_bytes);
  codec::FileInput::Buffers staging;
  codec::ReadAhead ahead;
  for (const std::uint64_t piece :
       {std::uint64_t{1}, std::uint64_t{100}, std::uint64_t{5000}, std::uint64_t{1} << 20}) {
    for (const bool overlap : {false, true}) {
      CAPTURE(piece, overlap);
      file.reads = 0;
      codec::FileInput in(file, 100, 100 + stream.size(), staging, piece, overlap ? &ahead : nullptr);
      codec::Decoder dec;
      std::vector<std::byte> out(g.size());
      CHECK(dec.decode(in, out, true) == stream.size());
      CHECK(out == g);
      CHECK(file.reads == in.reads());
      if (piece >= stream.size()) CHECK(file.reads == 1);  // a stream within one piece: one read
    }
  }
  // A block larger than the head room kept in front of a piece: joined across pieces.
  const auto big = gaussian_bf16(3 << 20, 1.0F, 5);
  const auto big_stream = encode(big, k3::DType::bf16, 4 << 20);
  BytesFile big_file(big_stream);
  for (const bool overlap : {false, true}) {
    codec::FileInput in(big_file, 0, big_stream.size(), staging, 300000, overlap ? &ahead : nullptr);
    codec::Decoder dec;
    std::vector<std::byte> out(big.size());
    CHECK(dec.decode(in, out, true) == big_stream.size());
    CHECK(out == big);
  }
}

TEST_CASE("trunk codec: every flipped byte, a truncation and a wrong size are refused", "[pack_trunk][codec][errors]") {
  const auto g = gaussian_bf16(5000, 0.02F, 4);  // two blocks of 8192 bytes
  for (const bool huffman : {false, true}) {
    const auto stream = encode(g, k3::DType::bf16, 8192, huffman);
    CAPTURE(huffman);
    for (std::size_t i = 0; i < stream.size(); ++i) {
      auto bad = stream;
      bad[i] ^= std::byte{0x10};
      CAPTURE(i);
      CHECK_THROWS_AS(decode(bad, g.size(), true), codec::CodecError);
    }
    for (const std::size_t keep : {std::size_t{0}, std::size_t{10}, std::size_t{40}, stream.size() - 1}) {
      const std::vector<std::byte> cut(stream.begin(), stream.begin() + static_cast<std::ptrdiff_t>(keep));
      CHECK_THROWS_WITH(decode(cut, g.size(), true), Catch::Contains("truncated"));
    }
    CHECK_THROWS_WITH(decode(stream, g.size() + 2, true), Catch::Contains("the tensor has"));
    CHECK_THROWS_WITH(decode(stream, g.size(), false), Catch::Contains("not BF16"));
  }
}

TEST_CASE("trunk codec: codec names", "[pack_trunk][codec]") {
  codec::Codec c{};
  CHECK(codec::parse_codec("bf16-zstd", c));
  CHECK(c == codec::Codec::bf16_zstd);
  CHECK(codec::parse_codec("bf16-huff", c));
  CHECK(c == codec::Codec::bf16_huff);
  CHECK(codec::parse_codec("none", c));
  CHECK(c == codec::Codec::none);
  CHECK_FALSE(codec::parse_codec("zstd", c));
  CHECK(codec::known_codecs() == "none, bf16-zstd, bf16-huff");
}

TEST_CASE("trunk codec: Huffman sections decode exactly, and damaged ones are refused or stay in bounds",
          "[pack_trunk][codec][errors]") {
  std::mt19937 rng(9);
  codec::HuffmanDecoder dec;
  for (const std::size_t n : {std::size_t{1}, std::size_t{3}, std::size_t{4}, std::size_t{33}, std::size_t{131072}}) {
    CAPTURE(n);
    std::vector<std::uint8_t> symbols(n);
    std::geometric_distribution<int> geo(0.3);
    for (auto& s : symbols) s = static_cast<std::uint8_t>(110 + std::min(geo(rng), 60));
    std::vector<std::byte> section;
    codec::huffman_encode(symbols, section);
    std::vector<std::uint8_t> out(n);
    dec.decode(section, out);
    CHECK(out == symbols);
    // Code lengths over 11, an over-subscribed code, stream lengths past the end: refused.
    auto bad = section;
    bad[55] = std::byte{0xCC};
    CHECK_THROWS_AS(dec.decode(bad, out), codec::CodecError);
    bad = section;
    for (int i = 0; i < 128; ++i) bad[static_cast<std::size_t>(i)] = std::byte{0x11};
    CHECK_THROWS_AS(dec.decode(bad, out), codec::CodecError);
    bad = section;
    bad[128 + 3] = std::byte{0x7F};
    CHECK_THROWS_AS(dec.decode(bad, out), codec::CodecError);
    CHECK_THROWS_AS(dec.decode({section.data(), section.size() - 9}, out), codec::CodecError);
    // Random damage to the streams: a clean error, or some output, never a read or write
    // outside the section and `out` (run it under valgrind or ASan to see that).
    for (int k = 0; k < 300; ++k) {
      bad = section;
      const std::size_t at = 140 + rng() % (bad.size() - 140);
      bad[at] ^= static_cast<std::byte>(1 + rng() % 255);
      try {
        dec.decode(bad, out);
      } catch (const codec::CodecError&) {
      }
    }
  }
}
