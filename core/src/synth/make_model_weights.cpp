// Seeded synthetic weights. Only integer and IEEE single arithmetic without transcendental
// functions is used on generated values (no std::*_distribution, whose algorithms are
// implementation-defined, and no libm calls whose last bit may differ between hosts), so a
// geometry and a seed give the same bytes everywhere.
#include <bit>
#include <cmath>

#include <xxhash.h>

#include "synth/make_model_parts.hpp"

namespace k3::detail {
namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// xoshiro256** 1.0 (Blackman & Vigna), seeded through splitmix64 as its authors recommend.
class Xoshiro256 {
 public:
  explicit Xoshiro256(std::uint64_t seed) {
    for (auto& w : s_) w = splitmix64(seed);
  }
  std::uint64_t next() {
    const std::uint64_t result = std::rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = std::rotl(s_[3], 45);
    return result;
  }
  /// Uniform in [0, 1) with 24 random bits: exact in float.
  float unit() { return static_cast<float>(next() >> 40) * 0x1p-24f; }
  /// Uniform in [-1, 1).
  float symmetric() { return 2.0f * unit() - 1.0f; }

 private:
  std::uint64_t s_[4];
};

std::uint16_t to_bf16(float f) {  // round to nearest even (values here are finite)
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  return static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

/// Element i of a BF16 or F32 tensor: v rounded to bf16, stored as its bits or widened
/// (exact), little-endian on every host.
void store(std::byte* out, std::uint64_t i, float v, DType dtype) {
  const std::uint16_t b = to_bf16(v);
  if (dtype == DType::bf16) {
    out[2 * i] = static_cast<std::byte>(b & 0xff);
    out[2 * i + 1] = static_cast<std::byte>(b >> 8);
    return;
  }
  const std::uint32_t w = std::uint32_t{b} << 16;
  for (int k = 0; k < 4; ++k)
    out[4 * i + static_cast<std::uint64_t>(k)] = static_cast<std::byte>((w >> (8 * k)) & 0xff);
}

// Root mean square of the 16 E2M1 values: sqrt((0+.25+1+2.25+4+9+16+36)·2/16).
constexpr double kE2M1Rms = 2.9261749776799064;

bool ends_with(std::string_view s, std::string_view suffix) { return s.ends_with(suffix); }

}  // namespace

std::uint64_t tensor_seed(std::uint64_t model_seed, std::string_view name) {
  return XXH64(name.data(), name.size(), model_seed);
}

InitRule init_rule(const TensorSpec& t, const TensorGroup& g, const ModelConfig& c) {
  InitRule r;
  r.dtype = t.dtype;
  const std::string_view n = t.name;
  if (g.kind == TensorGroup::Kind::routed_expert) {
    if (ends_with(n, ".weight_packed")) {
      r.kind = InitRule::Kind::fp4_codes;
    } else {
      // Group magnitude ~ 1/sqrt(fan_in): rms(E2M1) · 2^(s-127) = 1/sqrt(cols).
      const double cols = static_cast<double>(t.shape[1] * 32);
      r.kind = InitRule::Kind::fp4_scales;
      r.scale_byte = 127 + static_cast<int>(std::lround(-std::log2(kE2M1Rms * std::sqrt(cols))));
      r.zero_groups = g.expert % 4 == 1;  // exercise the scale-255 (zero group) path
    }
    return r;
  }
  if (ends_with(n, "conv1d.weight")) {
    r.kind = InitRule::Kind::conv_taps;
    r.conv_k = c.short_conv_kernel_size;
  } else if (ends_with(n, ".A_log")) {
    r.kind = InitRule::Kind::a_log;
  } else if (ends_with(n, ".dt_bias")) {
    r.kind = InitRule::Kind::dt_bias;
  } else if (ends_with(n, ".e_score_correction_bias")) {
    r.kind = InitRule::Kind::router_bias;
  } else if (t.shape.size() == 1) {
    r.kind = InitRule::Kind::near_one;  // every other 1-D tensor is an RMSNorm weight
  } else if (ends_with(n, "embed_tokens.weight")) {
    r.std = 1.0f;  // the first residual row; layer outputs are of the same order
  } else {
    // Projections y = W x with x of rms ~1: std 1/sqrt(fan_in) keeps y of rms ~1. The
    // AttnRes projections [1, E] follow the same rule (scores of order 1). The KDA decay path
    // f_b·f_a is kept small so the forget gate spans slow and fast decays.
    const double fan_in = static_cast<double>(t.shape.back());
    double s = 1.0 / std::sqrt(fan_in);
    if (ends_with(n, ".f_b_proj.weight")) s *= 0.25;
    r.std = static_cast<float>(s);
  }
  return r;
}

void generate_chunk(const InitRule& rule, std::uint64_t seed, std::uint64_t chunk, std::uint64_t count,
                    std::byte* out) {
  std::uint64_t chunk_seed = seed ^ (chunk * 0xd1b54a32d192ed03ull);
  Xoshiro256 rng(splitmix64(chunk_seed));
  const std::uint64_t first = chunk * kChunkElements;
  switch (rule.kind) {
    case InitRule::Kind::uniform: {
      const float a = rule.std * 1.7320508f;  // uniform(-a, a) has std a/sqrt(3)
      for (std::uint64_t i = 0; i < count; ++i) store(out, i, a * rng.symmetric(), rule.dtype);
      break;
    }
    case InitRule::Kind::near_one:
      for (std::uint64_t i = 0; i < count; ++i) store(out, i, 1.0f + 0.1f * rng.symmetric(), rule.dtype);
      break;
    case InitRule::Kind::conv_taps: {
      const auto K = static_cast<std::uint64_t>(rule.conv_k);
      for (std::uint64_t i = 0; i < count; ++i) {
        const bool current = (first + i) % K == K - 1;
        store(out, i, current ? 0.6f + 0.4f * rng.unit() : 0.25f * rng.symmetric(), rule.dtype);
      }
      break;
    }
    case InitRule::Kind::a_log:  // A = 2^(4u) in [1, 16): log A = 4u·ln 2
      for (std::uint64_t i = 0; i < count; ++i) store(out, i, 2.7725887f * rng.unit(), rule.dtype);
      break;
    case InitRule::Kind::dt_bias:
      for (std::uint64_t i = 0; i < count; ++i) store(out, i, 0.5f * rng.symmetric(), rule.dtype);
      break;
    case InitRule::Kind::router_bias:
      for (std::uint64_t i = 0; i < count; ++i) store(out, i, 0.02f * rng.symmetric(), rule.dtype);
      break;
    case InitRule::Kind::fp4_codes: {
      std::uint64_t x = 0;
      for (std::uint64_t i = 0; i < count; ++i, x >>= 8) {  // little-endian byte order on every host
        if (i % 8 == 0) x = rng.next();
        out[i] = static_cast<std::byte>(x & 0xff);
      }
      break;
    }
    case InitRule::Kind::fp4_scales:
      for (std::uint64_t i = 0; i < count; ++i) {
        const std::uint64_t x = rng.next();
        int s = rule.scale_byte + static_cast<int>((x & 3) == 0) * -1 + static_cast<int>((x & 3) == 3);
        if (rule.zero_groups && ((x >> 8) & 31) == 0) s = 255;  // 1 group in 32
        out[i] = static_cast<std::byte>(s);
      }
      break;
  }
}

}  // namespace k3::detail
