// Token selection: the next id from one row of logits, greedy or sampled, deterministic for
// a given (seed, position) and context, so that a resumed run, a batch and a model split over
// ranks (whose last rank picks, docs/cluster.md) all draw what one uninterrupted run draws.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace k3 {

struct SamplingSettings {
  double temperature = 0.0;  ///< 0 = greedy (first index of the maximum logit)
  std::int64_t top_k = 0;    ///< 0 = no limit
  double top_p = 1.0;        ///< nucleus: smallest set with cumulative probability >= top_p
  /// Keep only the tokens whose probability is at least min_p times the most likely one's
  /// (after top_k and top_p, at the temperature); 0 = no limit.
  double min_p = 0.0;
  /// llama.cpp's repeat penalty, applied to the logits before anything else (greedy too):
  /// the logit of every id among the last repeat_last_n ids of the context is divided by
  /// it when positive, multiplied by it otherwise (in float). 1 = off.
  double repeat_penalty = 1.0;
  std::int64_t repeat_last_n = 64;  ///< ids the penalty looks back over; 0 = off, -1 = the whole context
  std::uint64_t seed = 0;           ///< the draw at position p uses a generator seeded by (seed, p)
  /// Whether the repeat penalty changes anything (the sampler then needs the context).
  [[nodiscard]] bool penalizes() const noexcept { return repeat_penalty != 1.0 && repeat_last_n != 0; }
};

/// Picks the next token from one row of logits. Deterministic for a given (seed, position)
/// and context: `context` is every id before the one being picked (the repeat penalty's
/// window is its tail; unused while SamplingSettings::penalizes() is false).
std::uint32_t sample_token(const float* logits, std::size_t vocab, const SamplingSettings& s, std::int64_t position,
                           std::span<const std::uint32_t> context = {});

/// The ids the repeat penalty looks back over: the last repeat_last_n of `context` (all of
/// it for -1, none when the penalty is off).
[[nodiscard]] std::span<const std::uint32_t> repeat_window(const SamplingSettings& s,
                                                           std::span<const std::uint32_t> context) noexcept;

/// sample_token over a fixed vocabulary with its working memory allocated once, so that
/// picking a token allocates nothing. Draws exactly what sample_token draws.
class Sampler {
 public:
  explicit Sampler(std::size_t vocab);
  std::uint32_t sample(const float* logits, const SamplingSettings& s, std::int64_t position,
                       std::span<const std::uint32_t> context = {});

 private:
  /// The logits with the repeat penalty applied (a private copy), or `logits` itself.
  const float* penalized(const float* logits, const SamplingSettings& s, std::span<const std::uint32_t> context);

  std::size_t vocab_;
  std::vector<std::uint32_t> order_;
  std::vector<double> p_;
  std::vector<float> penalized_;         ///< allocated on the first penalized draw
  std::vector<std::uint32_t> repeated_;  ///< the window's distinct ids
};

}  // namespace k3
