// The values `synthetic` writes over tensor data: a rule per tensor (from its name, dtype and
// shape, as make-model initialises a checkpoint: projections uniform with std 1/sqrt(fan_in),
// RMSNorm weights near one, the KDA parameters in their working ranges, MXFP4 codes random
// and scales at the group magnitude 1/sqrt(fan_in)), and the fill itself.
//
// The fill is a copy from a small table of values drawn once per rule: the tensor is cut in
// blocks of about 4 KiB (counted from the tensor's first byte), and block b is the table
// slice starting at hash(seed, file, tensor offset, b). A byte's value therefore depends only
// on (file, absolute offset), never on how a read is split, and filling runs at memcpy speed
// (a full K3 token reads over 100 GB). Only integer and IEEE single arithmetic produce the
// values (no <random> distributions, no libm on the values), so every host gets the same bytes.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace k3::storage::synthetic {

enum class Dtype : std::uint8_t { bf16, f32, u8, other };

enum class Fill : std::uint8_t {
  none,         ///< left as the inner backend read it (a dtype the release does not use)
  fp4_codes,    ///< packed E2M1 pairs: every byte is valid, uniformly random
  fp4_scales,   ///< E8M0 group scales: scale_byte - 1, scale_byte, scale_byte + 1
  uniform,      ///< uniform(-a, a) with standard deviation `std`
  near_one,     ///< 1 + 0.1 u: RMSNorm weights
  conv_taps,    ///< the current tap (last of K) 0.6..1, the others -0.25..0.25
  a_log,        ///< A = 2^(4u) in [1, 16): log A
  dt_bias,      ///< 0.5 u
  router_bias,  ///< 0.02 u
};

struct Rule {
  Fill fill = Fill::none;
  Dtype dtype = Dtype::other;
  float std = 0;             ///< uniform
  int scale_byte = 0;        ///< fp4_scales
  std::uint32_t conv_k = 1;  ///< conv_taps: the kernel size (the table's period)
  friend bool operator==(const Rule&, const Rule&) = default;
};

inline std::size_t element_size(Dtype d) { return d == Dtype::f32 ? 4 : d == Dtype::bf16 ? 2 : 1; }

inline Dtype parse_dtype(std::string_view s) {
  if (s == "BF16") return Dtype::bf16;
  if (s == "F32") return Dtype::f32;
  if (s == "U8") return Dtype::u8;
  return Dtype::other;
}

// Root mean square of the 16 E2M1 values.
inline constexpr double kE2M1Rms = 2.9261749776799064;

/// The rule of one tensor. `shape` as in the header.
inline Rule rule_for(std::string_view name, Dtype dtype, std::span<const std::uint64_t> shape) {
  Rule r;
  r.dtype = dtype;
  if (dtype == Dtype::other || shape.empty()) return r;
  const std::uint64_t last = std::max<std::uint64_t>(shape.back(), 1);
  if (dtype == Dtype::u8) {
    if (name.ends_with("weight_scale") || name.ends_with(".scales")) {
      // Group magnitude ~ 1/sqrt(fan_in): rms(E2M1) * 2^(s-127) = 1/sqrt(32 * groups).
      const double cols = static_cast<double>(last) * 32.0;
      r.fill = Fill::fp4_scales;
      r.scale_byte = std::clamp(127 + static_cast<int>(std::lround(-std::log2(kE2M1Rms * std::sqrt(cols)))), 2, 253);
    } else {
      r.fill = Fill::fp4_codes;
    }
    return r;
  }
  if (name.ends_with("conv1d.weight")) {
    r.fill = Fill::conv_taps;
    r.conv_k = static_cast<std::uint32_t>(std::min<std::uint64_t>(last, 256));
  } else if (name.ends_with(".A_log")) {
    r.fill = Fill::a_log;
  } else if (name.ends_with(".dt_bias")) {
    r.fill = Fill::dt_bias;
  } else if (name.ends_with(".e_score_correction_bias")) {
    r.fill = Fill::router_bias;
  } else if (shape.size() == 1) {
    r.fill = Fill::near_one;  // every other vector is an RMSNorm weight
  } else if (name.ends_with("embed_tokens.weight")) {
    r.fill = Fill::uniform;
    r.std = 1.0f;  // the first residual row; layer outputs are of the same order
  } else {
    // y = W x with x of rms ~1: std 1/sqrt(fan_in) keeps y of rms ~1; the KDA decay path
    // f_b . f_a is kept small so the forget gate spans slow and fast decays.
    double s = 1.0 / std::sqrt(static_cast<double>(last));
    if (name.ends_with(".f_b_proj.weight")) s *= 0.25;
    r.fill = Fill::uniform;
    r.std = static_cast<float>(s);
  }
  return r;
}

inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// One 64-bit hash of a few words (splitmix64 finalisation chained).
inline std::uint64_t mix(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0, std::uint64_t d = 0) {
  std::uint64_t s = a;
  std::uint64_t h = splitmix64(s);
  for (std::uint64_t w : {b, c, d}) {
    s = h ^ w;
    h = splitmix64(s);
  }
  return h;
}

/// FNV-1a of a file name: the file's part of the key (its name, not its path, so the same
/// checkpoint read from another folder or over another backend gives the same bytes).
inline std::uint64_t name_hash(std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

inline std::uint16_t to_bf16(float f) {  // round to nearest even (the values are finite)
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  return static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

/// A table of values for one rule: the bytes a tensor's blocks are copied from.
class Table {
 public:
  static constexpr std::size_t kBytes = 256 * 1024;
  static constexpr std::size_t kBlockBytes = 4096;

  Table(const Rule& rule, std::uint64_t seed) : rule_(rule), bytes_(kBytes) {
    const std::size_t es = element_size(rule.dtype);
    const std::size_t count = kBytes / es;
    std::uint64_t state = mix(seed, static_cast<std::uint64_t>(rule.fill), std::bit_cast<std::uint32_t>(rule.std),
                              static_cast<std::uint64_t>(rule.scale_byte) << 32 | rule.conv_k);
    // A block is whole periods (conv taps: the current tap is the last of each K), and a
    // slice starts on a period, so element i of a tensor takes a value of its tap.
    period_ = rule.fill == Fill::conv_taps ? rule.conv_k : 1;
    block_elements_ = std::max<std::size_t>(kBlockBytes / es / period_ * period_, period_);
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint64_t x = splitmix64(state);
      const float unit = static_cast<float>(x >> 40) * 0x1p-24f;  // [0, 1), exact in float
      const float sym = 2.0f * unit - 1.0f;                       // [-1, 1)
      std::byte* out = bytes_.data() + i * es;
      switch (rule.fill) {
        case Fill::none: break;
        case Fill::fp4_codes: out[0] = static_cast<std::byte>(x & 0xff); break;
        case Fill::fp4_scales: {
          const int s = rule.scale_byte - static_cast<int>((x & 3) == 0) + static_cast<int>((x & 3) == 3);
          out[0] = static_cast<std::byte>(s);
          break;
        }
        case Fill::uniform:
          store(out, rule.std * 1.7320508f * sym);  // uniform(-a, a) has std a/sqrt(3)
          break;
        case Fill::near_one: store(out, 1.0f + 0.1f * sym); break;
        case Fill::conv_taps: store(out, i % period_ == period_ - 1 ? 0.6f + 0.4f * unit : 0.25f * sym); break;
        case Fill::a_log: store(out, 2.7725887f * unit); break;
        case Fill::dt_bias: store(out, 0.5f * sym); break;
        case Fill::router_bias: store(out, 0.02f * sym); break;
      }
    }
  }

  [[nodiscard]] const Rule& rule() const { return rule_; }
  /// Bytes of one block of a tensor with this rule (whole elements, whole periods).
  [[nodiscard]] std::size_t block_bytes() const { return block_elements_ * element_size(rule_.dtype); }
  /// The table byte where the block keyed `h` starts.
  [[nodiscard]] std::size_t slice_start(std::uint64_t h) const {
    const std::size_t es = element_size(rule_.dtype);
    const std::size_t starts = (kBytes / es - block_elements_) / period_ + 1;
    return static_cast<std::size_t>(h % starts) * period_ * es;
  }
  [[nodiscard]] const std::byte* data() const { return bytes_.data(); }

 private:
  /// A BF16 element as its bits, an F32 one as the same bf16 value widened (exact), so a
  /// tensor has the same values in either dtype; little-endian on every host.
  void store(std::byte* out, float v) const {
    const std::uint16_t b = to_bf16(v);
    if (rule_.dtype == Dtype::bf16) {
      out[0] = static_cast<std::byte>(b & 0xff);
      out[1] = static_cast<std::byte>(b >> 8);
      return;
    }
    const std::uint32_t w = std::uint32_t{b} << 16;
    for (int k = 0; k < 4; ++k) out[k] = static_cast<std::byte>((w >> (8 * k)) & 0xff);
  }

  Rule rule_;
  std::vector<std::byte> bytes_;
  std::size_t period_ = 1;
  std::size_t block_elements_ = 1;
};

/// A tensor's data in its file: [begin, end) absolute offsets, and the table it is cut from.
struct TensorSpan {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::shared_ptr<const Table> table;  ///< null: left unchanged
};

/// Writes the synthetic bytes of [offset, offset + length) of the file `file_key` into
/// `dest`, for every part of that range inside a tensor of `spans` (sorted by begin, not
/// overlapping); bytes outside every tensor (header, padding) are left as they are.
inline void fill_range(std::span<const TensorSpan> spans, std::uint64_t file_key, std::uint64_t seed,
                       std::uint64_t offset, std::uint64_t length, std::byte* dest) {
  const std::uint64_t stop = offset + length;
  auto it = std::upper_bound(spans.begin(), spans.end(), offset,
                             [](std::uint64_t off, const TensorSpan& t) { return off < t.end; });
  for (; it != spans.end() && it->begin < stop; ++it) {
    if (!it->table) continue;
    const Table& table = *it->table;
    const std::uint64_t bb = table.block_bytes();
    std::uint64_t at = std::max(offset, it->begin);
    const std::uint64_t until = std::min(stop, it->end);
    while (at < until) {
      const std::uint64_t block = (at - it->begin) / bb;
      const std::uint64_t block_begin = it->begin + block * bb;
      const std::uint64_t n = std::min(until, block_begin + bb) - at;
      const std::size_t src = table.slice_start(mix(seed, file_key, it->begin, block)) + (at - block_begin);
      std::memcpy(dest + (at - offset), table.data() + src, n);
      at += n;
    }
  }
}

}  // namespace k3::storage::synthetic
