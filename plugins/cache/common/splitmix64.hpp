// splitmix64 (Steele, Lea, Flood 2014): the finaliser that spreads a 64-bit key over all its
// bits (the key index's hash) and the seeded generator built on it (the sampling and drawing
// policies). Deterministic and platform-independent, so a seed gives the same victims anywhere.
#pragma once
#include <cstdint>

namespace k3cache {

/// splitmix64's finaliser: every input bit reaches every output bit.
[[nodiscard]] constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The splitmix64 sequence from a seed.
class SplitMix64 {
 public:
  void seed(std::uint64_t s) noexcept { state_ = s; }
  [[nodiscard]] std::uint64_t next() noexcept { return mix64(state_ += 0x9E3779B97F4A7C15ull); }
  /// Uniform in [0, 1): the top 53 bits.
  [[nodiscard]] double unit() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  std::uint64_t state_ = 0;
};

}  // namespace k3cache
