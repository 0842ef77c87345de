// The coded packed trunk's stream codec (see pack_trunk_codec.hpp).
#include "io/pack_trunk_codec.hpp"

#include <xxhash.h>
#include <zstd.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif

#include <algorithm>
#include <cstring>

#include <k3/error.hpp>
#include <k3/packed_trunk.hpp>

#include "io/read_failure.hpp"
#include "util/little_endian.hpp"
#include "util/reader_thread.hpp"

namespace k3::io::trunk_codec {
namespace {

constexpr char kMagic[4] = {'K', '3', 'T', 'Z'};
constexpr std::uint8_t kStreamVersion = 1;
constexpr std::uint8_t kStored = 0, kSplit = 1, kSplitHuffman = 2;
constexpr std::size_t kMinHuffmanSymbols = 4096;

/// XXH3-64 of the block table, seeded with the XXH3-64 of the header's first 24 bytes.
std::uint64_t header_hash(const std::byte* header, const std::byte* table, std::size_t table_bytes) {
  return XXH3_64bits_withSeed(table, table_bytes, XXH3_64bits(header, 24));
}

// BF16 (little-endian bytes lo, hi = s eeeeeee | e mmmmmmm) <-> exponent byte eeeeeeee and
// byte s mmmmmmm. Plain byte loops the compiler vectorises.
void split(const std::uint8_t* raw, std::size_t n, std::uint8_t* exp, std::uint8_t* sm) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t lo = raw[2 * i], hi = raw[2 * i + 1];
    exp[i] = static_cast<std::uint8_t>(hi << 1 | lo >> 7);
    sm[i] = static_cast<std::uint8_t>((hi & 0x80) | (lo & 0x7F));
  }
}
void join(const std::uint8_t* exp, const std::uint8_t* sm, std::size_t n, std::uint8_t* raw) {
  std::size_t i = 0;
#if defined(__SSE2__)
  // 16 values a step (SSE2 is in every x86-64): about 15x the scalar loop GCC leaves alone.
  const __m128i m7f = _mm_set1_epi8(0x7F), m80 = _mm_set1_epi8(static_cast<char>(0x80));
  for (; i + 16 <= n; i += 16) {
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(exp + i));
    const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sm + i));
    const __m128i lo = _mm_or_si128(_mm_and_si128(_mm_slli_epi16(e, 7), m80), _mm_and_si128(s, m7f));
    const __m128i hi = _mm_or_si128(_mm_and_si128(s, m80), _mm_and_si128(_mm_srli_epi16(e, 1), m7f));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(raw + 2 * i), _mm_unpacklo_epi8(lo, hi));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(raw + 2 * i + 16), _mm_unpackhi_epi8(lo, hi));
  }
#elif defined(__ARM_NEON)
  const uint8x16_t m7f = vdupq_n_u8(0x7F), m80 = vdupq_n_u8(0x80);
  for (; i + 16 <= n; i += 16) {
    const uint8x16_t e = vld1q_u8(exp + i), s = vld1q_u8(sm + i);
    uint8x16x2_t out;
    out.val[0] = vorrq_u8(vshlq_n_u8(e, 7), vandq_u8(s, m7f));
    out.val[1] = vorrq_u8(vandq_u8(s, m80), vshrq_n_u8(e, 1));
    vst2q_u8(raw + 2 * i, out);
  }
#endif
  for (; i < n; ++i) {
    const std::uint8_t e = exp[i], s = sm[i];
    raw[2 * i] = static_cast<std::uint8_t>((e << 7) | (s & 0x7F));
    raw[2 * i + 1] = static_cast<std::uint8_t>((s & 0x80) | (e >> 1));
  }
}

std::string zstd_error(const char* what, std::size_t code) {
  return std::string(what) + ": " + ZSTD_getErrorName(code);
}

}  // namespace

bool parse_codec(std::string_view text, Codec& out) {
  for (std::size_t i = 0; i < std::size(kNames); ++i)
    if (text == kNames[i]) {
      out = static_cast<Codec>(i);
      return true;
    }
  return false;
}

std::string_view name(Codec c) { return kNames[static_cast<std::size_t>(c)]; }

std::string known_codecs() {
  std::string out;
  for (const auto n : kNames) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

// ---- encoding ----

void Encoder::CtxFree::operator()(ZSTD_CCtx_s* c) const noexcept { ZSTD_freeCCtx(c); }

Encoder::Encoder(EncodeOptions options) : options_(options), cctx_(ZSTD_createCCtx()) {
  if (!cctx_) throw std::bad_alloc();
  if (options_.block_raw % 2 != 0 || options_.block_raw < kMinBlockRaw || options_.block_raw > kMaxBlockRaw)
    throw UsageError("trunk codec: block size " + std::to_string(options_.block_raw) + " must be even and within [" +
                     std::to_string(kMinBlockRaw) + ", " + std::to_string(kMaxBlockRaw) + "]");
  const auto set = [&](ZSTD_cParameter p, int v) {
    const std::size_t r = ZSTD_CCtx_setParameter(cctx_.get(), p, v);
    if (ZSTD_isError(r)) throw UsageError(zstd_error("trunk codec: zstd parameter", r));
  };
  set(ZSTD_c_compressionLevel, options_.level);
  if (options_.min_match != 0) set(ZSTD_c_minMatch, options_.min_match);
  set(ZSTD_c_checksumFlag, 0);  // each block carries its own XXH3 over the coded bytes
  set(ZSTD_c_dictIDFlag, 0);
  set(ZSTD_c_contentSizeFlag, 1);
}

Encoder::~Encoder() = default;

void Encoder::encode(std::span<const std::byte> raw, DType dtype, std::vector<std::byte>& out) {
  const std::uint64_t block_raw = options_.block_raw;
  const std::uint64_t n_blocks = (raw.size() + block_raw - 1) / block_raw;
  if (n_blocks > UINT32_MAX) throw UsageError("trunk codec: tensor too large for one stream");
  const bool bf16 = dtype == DType::bf16 && raw.size() % 2 == 0;
  const std::size_t start = out.size();
  out.resize(start + kHeaderBytes + kEntryBytes * n_blocks);
  for (std::uint64_t b = 0; b < n_blocks; ++b) {
    const std::uint64_t lo = b * block_raw, len = std::min<std::uint64_t>(block_raw, raw.size() - lo);
    const std::byte* src = raw.data() + lo;
    std::uint32_t exp_len = 0;
    const std::size_t payload = out.size();
    if (bf16) {
      const std::size_t n = len / 2;
      exp_.resize(2 * n);
      split(reinterpret_cast<const std::uint8_t*>(src), n, reinterpret_cast<std::uint8_t*>(exp_.data()),
            reinterpret_cast<std::uint8_t*>(exp_.data() + n));
      std::size_t r = n;  // not smaller: stored
      if (options_.huffman && n < kMinHuffmanSymbols) {
        // A small block (a norm vector) would spend more decoding its code table than its
        // symbols: stored (a few KB a layer).
      } else if (options_.huffman) {
        frame_.clear();
        huffman_encode({reinterpret_cast<const std::uint8_t*>(exp_.data()), n}, frame_);
        r = frame_.size();
      } else {
        frame_.resize(ZSTD_compressBound(n));
        r = ZSTD_compress2(cctx_.get(), frame_.data(), frame_.size(), exp_.data(), n);
        if (ZSTD_isError(r)) throw RuntimeError(zstd_error("trunk codec: zstd", r));
      }
      if (r < n) {  // worth it: [frame][sign+mantissa plane]
        exp_len = static_cast<std::uint32_t>(r);
        out.insert(out.end(), frame_.begin(), frame_.begin() + static_cast<std::ptrdiff_t>(r));
        out.insert(out.end(), exp_.begin() + static_cast<std::ptrdiff_t>(n), exp_.end());
      }
    }
    if (exp_len == 0) out.insert(out.end(), src, src + len);
    const std::size_t coded = out.size() - payload;
    std::byte* entry = out.data() + start + kHeaderBytes + kEntryBytes * b;
    util::store_le32(entry, static_cast<std::uint32_t>(coded));
    util::store_le32(entry + 4, exp_len);
    util::store_le64(entry + 8, XXH3_64bits(out.data() + payload, coded));
  }
  std::byte* h = out.data() + start;
  std::memcpy(h, kMagic, 4);
  h[4] = std::byte{kStreamVersion};
  h[5] = std::byte{!bf16 ? kStored : options_.huffman ? kSplitHuffman : kSplit};
  h[6] = h[7] = std::byte{0};
  util::store_le32(h + 8, options_.block_raw);
  util::store_le32(h + 12, static_cast<std::uint32_t>(n_blocks));
  util::store_le64(h + 16, raw.size());
  util::store_le64(h + 24, header_hash(h, h + kHeaderBytes, kEntryBytes * n_blocks));
}

// ---- inputs ----

const std::byte* MemoryInput::need(std::uint64_t n) {
  if (n > bytes_.size() - pos_)
    throw CodecError("truncated: " + std::to_string(n) + " bytes needed at offset " + std::to_string(pos_) + ", " +
                     std::to_string(bytes_.size() - pos_) + " left");
  return bytes_.data() + pos_;
}

void MemoryInput::skip(std::uint64_t n) {
  (void)need(n);
  pos_ += n;
}

// The background thread is the streaming reader threads' own (util/reader_thread.hpp):
// one piece queued at a time, its status published under the thread's lock.
struct ReadAhead::State {
  struct Piece {
    sdk::StorageFile* file = nullptr;
    sdk::ReadRequest request{};
    sdk::Status status;
  };
  sdk::Status status;  ///< of the last piece read, under the thread's lock
  bool done = false;
  util::ReaderThread<Piece> thread;  // last: stopped before what it publishes into goes
};

ReadAhead::ReadAhead() : s_(std::make_unique<State>()) {
  s_->thread.start(
      1,
      [](State::Piece& p) {
    p.status = p.file->read({&p.request, 1});
      },
      [state = s_.get()](State::Piece& p, std::exception_ptr) {  // read() is noexcept: no error to hand on
    state->status = std::move(p.status);
    state->done = true;
  });
}

ReadAhead::~ReadAhead() = default;  // the thread stops (and joins) with State

void ReadAhead::submit(sdk::StorageFile& file, sdk::ReadRequest request) {
  auto lk = s_->thread.lock();
  s_->done = false;
  s_->thread.push({&file, request, {}});
}

sdk::Status ReadAhead::wait() {
  auto lk = s_->thread.lock();
  s_->thread.wait(lk, [&] { return s_->done; });
  s_->done = false;
  return std::move(s_->status);
}

FileInput::FileInput(sdk::StorageFile& file, std::uint64_t begin, std::uint64_t end, Buffers& buffers,
                     std::uint64_t piece, ReadAhead* ahead)
    : file_(file), next_(begin), end_(end), cur_(&buffers.a), spare_(&buffers.b), piece_(piece), ahead_(ahead) {}

FileInput::~FileInput() {
  if (pending_ != 0 && ahead_ != nullptr) (void)ahead_->wait();  // the buffer must outlive the read
}

void FileInput::start() {
  const std::uint64_t n = std::min(piece_, end_ - next_);
  if (spare_->size() < kHead + n) *spare_ = AlignedBuffer(static_cast<std::size_t>(kHead + n));
  const sdk::ReadRequest request{next_, n, spare_->data() + kHead, sdk::StatusCode::ok};
  ++reads_;
  if (ahead_ != nullptr)
    ahead_->submit(file_, request);
  else {
    sdk::ReadRequest r = request;
    sync_status_ = file_.read({&r, 1});
  }
  pending_ = n;
}

std::uint64_t FileInput::take() {
  const std::uint64_t n = pending_;
  const std::uint64_t offset = next_;
  sdk::Status st = ahead_ != nullptr ? ahead_->wait() : std::move(sync_status_);
  pending_ = 0;
  for (int attempt = 1; attempt < 3 && !st.ok() && io::worth_retrying(st.code);
       ++attempt) {  // EIO, a short read recovers
    sdk::ReadRequest r{offset, n, spare_->data() + kHead, sdk::StatusCode::ok};
    ++reads_;
    st = file_.read({&r, 1});
  }
  if (!st.ok())
    io::throw_read_failure(st.code, "reading " + std::to_string(n) + " coded bytes at offset " +
                                        std::to_string(offset) + " failed: " + st.detail);
  next_ += n;
  return n;
}

void FileInput::fill() {
  if (pending_ == 0) start();  // nothing in flight (the first piece): read it now
  const std::uint64_t kept = hi_ - lo_;
  const std::uint64_t n = take();
  if (kept <= kHead) {  // the unconsumed tail goes in front of the new piece
    if (kept != 0) std::memcpy(spare_->data() + kHead - kept, cur_->data() + lo_, kept);  // cur_ may be unallocated
    std::swap(cur_, spare_);
    lo_ = kHead - kept;
    hi_ = kHead + n;
  } else {  // a unit larger than the head room: joined in the current buffer
    if (cur_->size() < kept + n) {
      AlignedBuffer grown(static_cast<std::size_t>(kept + n));
      std::memcpy(grown.data(), cur_->data() + lo_, kept);
      *cur_ = std::move(grown);
    } else {
      std::memmove(cur_->data(), cur_->data() + lo_, kept);
    }
    std::memcpy(cur_->data() + kept, spare_->data() + kHead, n);
    lo_ = 0;
    hi_ = kept + n;
  }
  if (next_ < end_ && ahead_ != nullptr) start();  // read the next piece while this one is decoded
}

const std::byte* FileInput::need(std::uint64_t n) {
  while (hi_ - lo_ < n) {
    if (n - (hi_ - lo_) > end_ - next_)
      throw CodecError("truncated: " + std::to_string(n) + " bytes needed, the coded span has " +
                       std::to_string(hi_ - lo_ + (end_ - next_)) + " left");
    fill();
  }
  return cur_->data() + lo_;
}

void FileInput::skip(std::uint64_t n) {
  (void)need(n);
  lo_ += n;
}

// ---- decoding ----

void Decoder::CtxFree::operator()(ZSTD_DCtx_s* d) const noexcept { ZSTD_freeDCtx(d); }

Decoder::Decoder() : dctx_(ZSTD_createDCtx()) {
  if (!dctx_) throw std::bad_alloc();
}

Decoder::~Decoder() = default;

std::uint64_t Decoder::decode(Input& in, std::span<std::byte> out, bool bf16) {
  const std::byte* h = in.need(kHeaderBytes);
  if (std::memcmp(h, kMagic, 4) != 0) throw CodecError("not a coded tensor stream (bad magic)");
  if (std::to_integer<int>(h[4]) != kStreamVersion)
    throw CodecError("stream version " + std::to_string(std::to_integer<int>(h[4])) + ", this k3host reads " +
                     std::to_string(kStreamVersion));
  const int kind = std::to_integer<int>(h[5]);
  if (kind != kStored && kind != kSplit && kind != kSplitHuffman)
    throw CodecError("unknown block kind " + std::to_string(kind));
  if (kind != kStored && !bf16) throw CodecError("bf16 split blocks in a tensor that is not BF16");
  if (h[6] != std::byte{0} || h[7] != std::byte{0}) throw CodecError("reserved header bytes are not zero");
  const std::uint32_t block_raw = util::load_le32(h + 8);
  const std::uint32_t n_blocks = util::load_le32(h + 12);
  const std::uint64_t raw_bytes = util::load_le64(h + 16);
  const std::uint64_t hash = util::load_le64(h + 24);
  if (block_raw % 2 != 0 || block_raw < kMinBlockRaw || block_raw > kMaxBlockRaw)
    throw CodecError("bad block size " + std::to_string(block_raw));
  if (raw_bytes != out.size())
    throw CodecError("stream holds " + std::to_string(raw_bytes) + " bytes, the tensor has " +
                     std::to_string(out.size()));
  if (n_blocks != (raw_bytes + block_raw - 1) / block_raw)
    throw CodecError(std::to_string(n_blocks) + " blocks do not cover " + std::to_string(raw_bytes) + " bytes of " +
                     std::to_string(block_raw));
  std::byte header[24];
  std::memcpy(header, h, 24);
  in.skip(kHeaderBytes);
  const std::uint64_t table_bytes = std::uint64_t{kEntryBytes} * n_blocks;
  table_.resize(static_cast<std::size_t>(table_bytes));
  if (table_bytes != 0) std::memcpy(table_.data(), in.need(table_bytes), table_bytes);  // an empty tensor has none
  in.skip(table_bytes);
  if (header_hash(header, table_.data(), table_.size()) != hash) throw CodecError("header checksum mismatch (damaged)");

  std::uint64_t consumed = kHeaderBytes + table_bytes;
  for (std::uint32_t b = 0; b < n_blocks; ++b) {
    const std::byte* e = table_.data() + std::size_t{kEntryBytes} * b;
    const std::uint32_t coded = util::load_le32(e), exp_len = util::load_le32(e + 4);
    const std::uint64_t lo = std::uint64_t{b} * block_raw, len = std::min<std::uint64_t>(block_raw, raw_bytes - lo);
    const auto where = [b] {
      return "block " + std::to_string(b) + ": ";
    };  // only on an error: no allocation per block
    if (exp_len == 0 ? coded != len : (kind == kStored || len % 2 != 0 || coded != exp_len + len / 2))
      throw CodecError(where() + "bad length (coded " + std::to_string(coded) + ", exponent frame " +
                       std::to_string(exp_len) + ", raw " + std::to_string(len) + ")");
    const std::byte* p = in.need(coded);
    if (XXH3_64bits(p, coded) != util::load_le64(e + 8)) throw CodecError(where() + "checksum mismatch (damaged)");
    std::byte* dst = out.data() + lo;
    if (exp_len == 0) {
      std::memcpy(dst, p, len);
    } else {
      const std::size_t n = len / 2;
      if (exp_.size() < n) exp_.resize(n);
      if (kind == kSplitHuffman) {
        try {
          huffman_.decode({p, exp_len}, {reinterpret_cast<std::uint8_t*>(exp_.data()), n});
        } catch (const CodecError& error) {
          throw CodecError(where() + error.what());
        }
      } else {
        const std::size_t r = ZSTD_decompressDCtx(dctx_.get(), exp_.data(), n, p, exp_len);
        if (ZSTD_isError(r)) throw CodecError(where() + zstd_error("exponent frame", r));
        if (r != n)
          throw CodecError(where() + "exponent frame holds " + std::to_string(r) + " bytes, expected " +
                           std::to_string(n));
      }
      join(reinterpret_cast<const std::uint8_t*>(exp_.data()), reinterpret_cast<const std::uint8_t*>(p + exp_len), n,
           reinterpret_cast<std::uint8_t*>(dst));
    }
    in.skip(coded);
    consumed += coded;
  }
  return consumed;
}

}  // namespace k3::io::trunk_codec

std::vector<std::string> k3::trunk_codec_names() {
  return {std::begin(io::trunk_codec::kNames), std::end(io::trunk_codec::kNames)};
}
