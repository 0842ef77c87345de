// Token selection. First llama.cpp's repeat penalty, when asked, on a float copy of the
// logits: each distinct id among the last repeat_last_n of the context gets its logit divided
// by the penalty when positive, multiplied otherwise. Greedy = first index of the maximum.
// Sampling works in fp64 on a private copy: logits / temperature, keep the top-k (ties →
// lower id), softmax, keep the smallest prefix whose probability reaches top_p, then those at
// least min_p times the first, then draw with a generator seeded by (seed, position) so that
// a resumed run draws exactly what an uninterrupted one would.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <k3/sampler.hpp>

namespace k3 {
namespace {

std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Uniform in [0, 1) with 53 random bits.
double uniform01(std::uint64_t seed, std::int64_t position) {
  std::uint64_t x = seed ^ (static_cast<std::uint64_t>(position) * 0xD1B54A32D192ED03ull);
  splitmix64(x);
  return static_cast<double>(splitmix64(x) >> 11) * 0x1.0p-53;
}

}  // namespace

std::uint32_t sample_token(const float* logits, std::size_t vocab, const SamplingSettings& s, std::int64_t position,
                           std::span<const std::uint32_t> context) {
  Sampler sampler(vocab);
  return sampler.sample(logits, s, position, context);
}

std::span<const std::uint32_t> repeat_window(const SamplingSettings& s,
                                             std::span<const std::uint32_t> context) noexcept {
  if (!s.penalizes()) return {};
  if (s.repeat_last_n < 0 || static_cast<std::uint64_t>(s.repeat_last_n) >= context.size()) return context;
  return context.last(static_cast<std::size_t>(s.repeat_last_n));
}

Sampler::Sampler(std::size_t vocab) : vocab_(vocab), order_(vocab), p_(vocab) {}

const float* Sampler::penalized(const float* logits, const SamplingSettings& s,
                                std::span<const std::uint32_t> context) {
  const std::span<const std::uint32_t> window = repeat_window(s, context);
  if (window.empty()) return logits;
  penalized_.assign(logits, logits + vocab_);
  repeated_.assign(window.begin(), window.end());
  std::sort(repeated_.begin(), repeated_.end());
  repeated_.erase(std::unique(repeated_.begin(), repeated_.end()), repeated_.end());
  // In float, as llama.cpp does: the same bits for the same logits, on every machine.
  const auto penalty = static_cast<float>(s.repeat_penalty);
  for (const std::uint32_t id : repeated_) {
    if (id >= vocab_) continue;  // not an id of this vocabulary: nothing to penalise
    float& l = penalized_[id];
    l = l <= 0.0f ? l * penalty : l / penalty;
  }
  return penalized_.data();
}

std::uint32_t Sampler::sample(const float* raw_logits, const SamplingSettings& s, std::int64_t position,
                              std::span<const std::uint32_t> context) {
  const std::size_t vocab = vocab_;
  const float* logits = penalized(raw_logits, s, context);
  if (s.temperature <= 0.0) {
    std::size_t best = 0;
    for (std::size_t i = 1; i < vocab; ++i)
      if (logits[i] > logits[best]) best = i;
    return static_cast<std::uint32_t>(best);
  }
  // Descending logits, ties → lower id: a total order, so sorting only the kept prefix
  // gives the same prefix as a stable sort of everything (and needs no temporary buffer).
  std::iota(order_.begin(), order_.end(), 0u);
  std::size_t keep = vocab;
  if (s.top_k > 0) keep = std::min<std::size_t>(keep, static_cast<std::size_t>(s.top_k));
  std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(keep), order_.end(),
                    [&](std::uint32_t a, std::uint32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  const std::uint32_t* order = order_.data();
  p_.resize(keep);  // within the capacity of vocab
  std::vector<double>& p = p_;
  const double m = logits[order[0]] / s.temperature;
  double z = 0;
  for (std::size_t i = 0; i < keep; ++i) z += p[i] = std::exp(logits[order[i]] / s.temperature - m);
  for (double& v : p) v /= z;
  if (s.top_p < 1.0) {
    double cum = 0;
    std::size_t n = 0;
    while (n < keep && cum < s.top_p) cum += p[n++];
    keep = std::max<std::size_t>(n, 1);
    p.resize(keep);
    z = std::accumulate(p.begin(), p.end(), 0.0);
    for (double& v : p) v /= z;
  }
  if (s.min_p > 0.0) {
    // p is in descending order: the kept tokens are a prefix, the first one always among them.
    const double floor = s.min_p * p[0];
    std::size_t n = 1;
    while (n < keep && p[n] >= floor) ++n;
    if (n < keep) {
      keep = n;
      p.resize(keep);
      z = std::accumulate(p.begin(), p.end(), 0.0);
      for (double& v : p) v /= z;
    }
  }
  const double u = uniform01(s.seed, position);
  double cum = 0;
  for (std::size_t i = 0; i < keep; ++i) {
    cum += p[i];
    if (u < cum) return order[i];
  }
  return order[keep - 1];
}

}  // namespace k3
