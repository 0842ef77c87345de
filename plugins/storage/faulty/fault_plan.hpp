// Which fault a request gets, as a pure function of (seed, offset, length) and the
// parameters, so the outcome never depends on call order or thread timing.
//
// Precedence: a zero-length request never fails; then a fail_offsets hit or a request
// reaching past fail_after_bytes is a permanent EIO; then eio_rate, short_read_rate and
// delay_rate are drawn independently (EIO before short read; a delay may accompany either
// or nothing).
#pragma once
#include <cstdint>
#include <vector>

namespace k3::storage::faulty {

enum class Fault { none, eio, short_read };

struct FaultParams {
  std::uint64_t seed = 0;
  double short_read_rate = 0.0;
  double eio_rate = 0.0;
  double delay_rate = 0.0;
  std::vector<std::uint64_t> fail_offsets;      ///< a request covering one always fails
  std::uint64_t fail_after_bytes = UINT64_MAX;  ///< a request reaching past it always fails
};

struct FaultDecision {
  Fault fault = Fault::none;
  bool permanent = false;  ///< fail_offsets / fail_after_bytes: fails even when retried
  bool delay = false;
  std::uint64_t short_got = 0;  ///< short_read: bytes reported as read (< length)
};

/// SplitMix64 finaliser: a well-mixed 64-bit hash.
inline std::uint64_t mix(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// A uniform number in [0, 1) for (seed, offset, length, stream).
inline double draw(std::uint64_t seed, std::uint64_t offset, std::uint64_t length, std::uint64_t stream) noexcept {
  const std::uint64_t h = mix(mix(mix(seed ^ stream) ^ offset) ^ length);
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

inline FaultDecision decide(const FaultParams& p, std::uint64_t offset, std::uint64_t length) {
  FaultDecision d;
  if (length == 0) return d;
  for (const std::uint64_t x : p.fail_offsets)
    if (x >= offset && x - offset < length) {
      d.fault = Fault::eio;
      d.permanent = true;
      return d;
    }
  if (offset + length > p.fail_after_bytes || offset + length < offset) {
    d.fault = Fault::eio;
    d.permanent = true;
    return d;
  }
  d.delay = draw(p.seed, offset, length, 3) < p.delay_rate;
  if (draw(p.seed, offset, length, 1) < p.eio_rate) {
    d.fault = Fault::eio;
  } else if (draw(p.seed, offset, length, 2) < p.short_read_rate) {
    d.fault = Fault::short_read;
    d.short_got = static_cast<std::uint64_t>(draw(p.seed, offset, length, 4) * static_cast<double>(length));
    if (d.short_got >= length) d.short_got = length - 1;
  }
  return d;
}

}  // namespace k3::storage::faulty
