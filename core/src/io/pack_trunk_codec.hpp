// The exact codec of a coded packed trunk (k3host pack-trunk --codec bf16-zstd; the format is
// in docs/streaming.md, "Coded packed trunk").
//
// Each tensor of a coded layer run is one self-describing stream:
//   header (32 bytes): "K3TZ", version 1, kind (0 stored, 1 bf16 split with zstd, 2 bf16
//                      split with Huffman), 2 bytes zero,
//                      block_raw (u32), n_blocks (u32), raw_bytes (u64),
//                      checksum (u64): XXH3-64 of the block table seeded with the XXH3-64
//                      of the header's first 24 bytes
//   block table: n_blocks × { coded_len (u32), exp_len (u32), XXH3-64 of the payload (u64) }
//   payloads, back to back.
// Block i holds raw bytes [i·block_raw, min(raw_bytes, (i+1)·block_raw)). A stored block's
// payload is those bytes (exp_len 0). A split block (kinds 1 and 2) of n BF16 values is
// [the n exponent bytes coded (exp_len bytes): a zstd frame (kind 1) or a Huffman section
// (kind 2, pack_trunk_huffman.hpp)][n sign+mantissa bytes]: BF16 bits
// s eeeeeeee mmmmmmm become the exponent byte eeeeeeee (≈3 bits of entropy in trained and
// Gaussian weights, so it codes to ~3/8) and the byte s mmmmmmm, stored raw (≈8 bits of
// entropy, nothing to gain). Blocks decode independently of each other.
//
// All integers little-endian. Every length and checksum is checked before a byte is
// decoded; a problem is a CodecError (the caller names the file, layer and tensor).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <k3/checkpoint.hpp>
#include <k3/storage.hpp>

#include "io/pack_trunk_huffman.hpp"
#include "util/aligned_buffer.hpp"

struct ZSTD_DCtx_s;
struct ZSTD_CCtx_s;

namespace k3::io::trunk_codec {

/// A malformed or damaged coded stream; the message says what, without the file.
class CodecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Codec : std::uint8_t { none, bf16_zstd, bf16_huff };
inline constexpr std::string_view kNames[] = {"none", "bf16-zstd", "bf16-huff"};
/// "none" | "bf16-zstd" | "bf16-huff" (kNames); false for another name.
bool parse_codec(std::string_view name, Codec& out);
std::string_view name(Codec c);
/// "none, bf16-zstd", for messages.
std::string known_codecs();

inline constexpr std::uint32_t kHeaderBytes = 32;
inline constexpr std::uint32_t kEntryBytes = 16;
inline constexpr std::uint32_t kDefaultBlockRaw = 256 << 10;
inline constexpr std::uint32_t kMinBlockRaw = 4096;
inline constexpr std::uint32_t kMaxBlockRaw = 16 << 20;
inline constexpr int kDefaultLevel = 1;
/// zstd's longest minimum match: the exponent bytes have few long repeats, and short matches
/// cost more to decode (and save less) than the literals they replace.
inline constexpr int kDefaultMinMatch = 7;

struct EncodeOptions {
  std::uint32_t block_raw = kDefaultBlockRaw;  ///< even, within [kMinBlockRaw, kMaxBlockRaw]
  int level = kDefaultLevel;                   ///< zstd level of the exponent frames
  int min_match = kDefaultMinMatch;            ///< zstd minimum match length (0: the level's)
  bool huffman = false;                        ///< bf16-huff: the exponent bytes Huffman-coded, not zstd
};

/// Encodes one tensor's bytes: BF16 as split blocks (a block that does not shrink is
/// stored), any other dtype as stored blocks. Not thread-safe: one per thread.
class Encoder {
 public:
  explicit Encoder(EncodeOptions options = {});
  ~Encoder();
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;
  /// Appends the stream of `raw` to `out`.
  void encode(std::span<const std::byte> raw, DType dtype, std::vector<std::byte>& out);

 private:
  struct CtxFree {
    void operator()(ZSTD_CCtx_s* c) const noexcept;
  };
  EncodeOptions options_;
  std::unique_ptr<ZSTD_CCtx_s, CtxFree> cctx_;
  std::vector<std::byte> exp_, frame_;
};

/// Where a decoder takes coded bytes from: need(n) returns n contiguous bytes starting at
/// the current position (valid until the next need/skip), or throws CodecError when the
/// stream ends first; skip(n) moves past them.
class Input {
 public:
  virtual ~Input() = default;
  virtual const std::byte* need(std::uint64_t n) = 0;
  virtual void skip(std::uint64_t n) = 0;
};

/// Coded bytes already in memory.
class MemoryInput final : public Input {
 public:
  explicit MemoryInput(std::span<const std::byte> bytes) : bytes_(bytes) {}
  const std::byte* need(std::uint64_t n) override;
  void skip(std::uint64_t n) override;

 private:
  std::span<const std::byte> bytes_;
  std::uint64_t pos_ = 0;
};

/// Reads one request at a time on a thread of its own, so that the next piece of a coded
/// span is read while the current one is decoded (reading and decoding overlap). Started at
/// construction, joined at destruction; submit() and wait() alternate, from one thread.
class ReadAhead {
 public:
  ReadAhead();
  ~ReadAhead();
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;
  /// `request.dest` must stay valid until wait() returns.
  void submit(sdk::StorageFile& file, sdk::ReadRequest request);
  /// Waits for the submitted read; its status.
  sdk::Status wait();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

/// [begin, end) of a file read through a storage plugin in pieces of `piece` bytes into two
/// buffers the caller keeps (so refills do not allocate): with `ahead`, the next piece is
/// read on its thread while the caller decodes the current one. A failed read (retried
/// twice) is a RuntimeError, not a CodecError: the caller names the file.
class FileInput final : public Input {
 public:
  /// 4096-aligned, as the pieces' file offsets are (from a run's start): O_DIRECT reads
  /// them straight in, with no bounce buffer.
  struct Buffers {
    AlignedBuffer a, b;
  };
  /// Bytes kept in front of every piece for a unit that straddles two pieces (larger units
  /// are joined by copying).
  static constexpr std::uint64_t kHead = std::uint64_t{1} << 20;

  FileInput(sdk::StorageFile& file, std::uint64_t begin, std::uint64_t end, Buffers& buffers, std::uint64_t piece,
            ReadAhead* ahead = nullptr);
  ~FileInput() override;
  FileInput(const FileInput&) = delete;
  FileInput& operator=(const FileInput&) = delete;
  const std::byte* need(std::uint64_t n) override;
  void skip(std::uint64_t n) override;
  /// Requests read so far.
  [[nodiscard]] std::uint64_t reads() const noexcept { return reads_; }

 private:
  void fill();
  void start();          ///< the next piece into spare_ at kHead (on `ahead`, or now)
  std::uint64_t take();  ///< waits for it; its length
  sdk::StorageFile& file_;
  std::uint64_t next_, end_;  ///< the file offset of the next byte not yet requested, the end
  AlignedBuffer* cur_;
  AlignedBuffer* spare_;
  std::uint64_t piece_;
  ReadAhead* ahead_;
  std::uint64_t lo_ = 0, hi_ = 0;  ///< (*cur_)[lo_, hi_) holds unconsumed bytes
  std::uint64_t pending_ = 0;      ///< bytes of the piece started into spare_ (0: none)
  sdk::Status sync_status_;        ///< of a piece read without `ahead`
  std::uint64_t reads_ = 0;
};

/// Decodes streams. Not thread-safe: one per thread (a zstd context and an exponent
/// scratch buffer of one block, both reused).
class Decoder {
 public:
  Decoder();
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;
  /// Decodes one stream from `in` into `out` (exactly out.size() raw bytes, which the header
  /// must say); `bf16`: split blocks are allowed. Consumes exactly the stream's bytes and
  /// returns how many that was. CodecError on any inconsistency.
  std::uint64_t decode(Input& in, std::span<std::byte> out, bool bf16);

 private:
  struct CtxFree {
    void operator()(ZSTD_DCtx_s* d) const noexcept;
  };
  std::unique_ptr<ZSTD_DCtx_s, CtxFree> dctx_;
  HuffmanDecoder huffman_;
  std::vector<std::byte> exp_;
  std::vector<std::byte> table_;
};

}  // namespace k3::io::trunk_codec
