// Synthetic expert traces (k3/sim.hpp): per-layer Zipf popularity over a random
// permutation of the experts, plus token-to-token reuse within a layer.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <xxhash.h>

#include <k3/error.hpp>
#include <k3/sim.hpp>
#include <k3/trace.hpp>
#include <k3/units.hpp>

namespace k3 {

namespace {

// Uniform in [0, 1) from the top 53 bits: the same on every platform, unlike
// std::uniform_real_distribution, whose algorithm the standard leaves open.
double uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Uniform integer in [0, n) by rejection (unbiased, platform-independent).
std::uint32_t below(std::mt19937_64& rng, std::uint32_t n) {
  const std::uint64_t limit = (~std::uint64_t{0}) - (~std::uint64_t{0}) % n;
  for (;;) {
    const std::uint64_t x = rng();
    if (x < limit) return static_cast<std::uint32_t>(x % n);
  }
}

/// a x b in decimal, exact even where it does not fit 64 bits (for a message).
std::string product(std::uint64_t a, std::uint64_t b) {
  __extension__ typedef unsigned __int128 Wide;
  Wide v = static_cast<Wide>(a) * b;
  std::string digits;
  do {
    digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  } while (v != 0);
  return digits;
}

/// Layers x experts the generator keeps a rank -> expert table for (64 MiB of them; the
/// full K3 has 92 x 896).
constexpr std::uint64_t kMaxRankedExperts = std::uint64_t{1} << 24;

/// The settings' ranges, each refused with the flag that sets it.
void check_settings(const TraceGenSettings& g) {
  if (g.layers == 0 || g.layers > 65536) throw UsageError("trace generator: --layers must be 1..65536");
  if (g.experts == 0 || g.experts > 65536) throw UsageError("trace generator: --experts must be 1..65536");
  if (g.top_k == 0 || g.top_k > g.experts)
    throw UsageError("trace generator: --top-k must be 1..experts (" + std::to_string(g.experts) + ")");
  if (g.tokens == 0) throw UsageError("trace generator: --tokens must be > 0");
  if (!(g.zipf >= 0) || !std::isfinite(g.zipf)) throw UsageError("trace generator: --zipf must be >= 0");
  if (!(g.reuse >= 0 && g.reuse <= 1)) throw UsageError("trace generator: --reuse must be in [0, 1]");
  if (g.recompute_prompt > g.tokens)
    throw UsageError("trace generator: --recompute-prompt must be 0..tokens (" + std::to_string(g.tokens) + ")");
}

/// Bounds derived from the settings, checked before anything is allocated: the records (a
/// trace k3host reads back, so no more than read_trace accepts) and the per-layer ranking
/// tables. `forwards`: positions fed through the model, recomputation included.
void check_sizes(const TraceGenSettings& g, std::uint64_t forwards, std::uint64_t per_position) {
  if (forwards > kTraceMaxRecords / per_position)
    throw UsageError("trace generator: " + std::to_string(g.layers) + " layers x top-" + std::to_string(g.top_k) +
                     " x " + std::to_string(forwards) + " forwards" +
                     (g.recompute_prompt > 0 ? " (every step recomputed from position 0)" : "") + " = " +
                     product(per_position, forwards) + " requests, more than the " + std::to_string(kTraceMaxRecords) +
                     " a trace may hold (" + format_bytes(kTraceMaxFileBytes) +
                     ", the largest trace k3host reads); give fewer --tokens or --layers");
  const std::uint64_t ranked = std::uint64_t{g.layers} * g.experts;
  if (ranked > kMaxRankedExperts)
    throw UsageError("trace generator: " + std::to_string(g.layers) + " layers x " + std::to_string(g.experts) +
                     " experts = " + std::to_string(ranked) + " experts to rank, more than the " +
                     std::to_string(kMaxRankedExperts) + " the generator holds tables for (4 bytes each)");
}

/// Popularity CDF by rank (shared by all layers); each layer maps rank -> expert through
/// its own permutation, so different layers have different hot experts.
struct Popularity {
  std::vector<double> cdf;
  std::vector<std::vector<std::uint32_t>> expert_of_rank;
};

/// The Zipf CDF, and each layer's permutation drawn from `rng` (layer by layer).
Popularity popularity(const TraceGenSettings& g, std::mt19937_64& rng) {
  Popularity p;
  p.cdf.resize(g.experts);
  double sum = 0;
  for (std::uint32_t r = 0; r < g.experts; ++r) {
    sum += std::pow(static_cast<double>(r) + 1.0, -g.zipf);
    p.cdf[r] = sum;
  }
  for (double& c : p.cdf) c /= sum;
  p.expert_of_rank.assign(g.layers, std::vector<std::uint32_t>(g.experts));
  for (auto& perm : p.expert_of_rank) {
    for (std::uint32_t e = 0; e < g.experts; ++e) perm[e] = e;
    for (std::uint32_t i = g.experts; i-- > 1;) std::swap(perm[i], perm[below(rng, i + 1)]);  // Fisher-Yates
  }
  return p;
}

/// No model and no prompt: the prompt hash identifies the generator settings instead.
std::uint64_t settings_hash(const TraceGenSettings& g) {
  const std::string id = "gen:" + std::to_string(g.layers) + ":" + std::to_string(g.experts) + ":" +
                         std::to_string(g.top_k) + ":" + std::to_string(g.tokens) + ":" + std::to_string(g.zipf) + ":" +
                         std::to_string(g.reuse) + ":" + std::to_string(g.recompute_prompt) + ":" +
                         std::to_string(g.seed);
  return XXH64(id.data(), id.size(), 0);
}

/// Fills `chosen` up to top_k with fresh draws by popularity without replacement, marking
/// each in `taken`: rejection while cheap, then an exact draw over the remaining mass
/// (steep Zipf makes repeats of the head likely). Apart from generate_trace: the sampler.
void draw_fresh(const TraceGenSettings& g, const Popularity& pop, std::uint32_t layer, std::mt19937_64& rng,
                std::vector<std::uint32_t>& chosen, std::vector<std::uint8_t>& taken) {
  const std::vector<double>& cdf = pop.cdf;
  const std::vector<std::uint32_t>& expert_of_rank = pop.expert_of_rank[layer];
  int rejections = 0;
  while (chosen.size() < g.top_k) {
    std::uint32_t e = 0;
    if (rejections < 64) {
      const double u = uniform(rng);
      const auto rank = static_cast<std::uint32_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
      e = expert_of_rank[std::min(rank, g.experts - 1)];
      if (taken[e] != 0) {
        ++rejections;
        continue;
      }
    } else {
      double left = 0;
      for (std::uint32_t r = 0; r < g.experts; ++r)
        if (taken[expert_of_rank[r]] == 0) left += cdf[r] - (r ? cdf[r - 1] : 0.0);
      double u = uniform(rng) * left;
      std::uint32_t pick = g.experts;
      for (std::uint32_t r = 0; r < g.experts; ++r) {
        if (taken[expert_of_rank[r]] != 0) continue;
        pick = r;
        u -= cdf[r] - (r ? cdf[r - 1] : 0.0);
        if (u < 0) break;
      }
      e = expert_of_rank[pick];
    }
    chosen.push_back(e);
    taken[e] = 1;
  }
}

}  // namespace

Trace generate_trace(const TraceGenSettings& g) {
  check_settings(g);
  std::uint64_t forwards = g.tokens;  // positions fed through the model, recomputation included
  if (g.recompute_prompt > 0) {
    forwards = 0;
    for (std::uint64_t end = g.recompute_prompt; end <= g.tokens; ++end) forwards += end;
  }
  const std::uint64_t per_position = std::uint64_t{g.layers} * g.top_k;
  check_sizes(g, forwards, per_position);
  const std::uint64_t total = per_position * forwards;

  std::mt19937_64 rng(g.seed);
  const Popularity pop = popularity(g, rng);

  Trace t;
  t.header.layers = g.layers;
  t.header.experts_per_layer = g.experts;
  t.header.top_k = g.top_k;
  t.header.expert_bytes = g.expert_bytes;
  t.header.prompt_hash = settings_hash(g);
  std::vector<TraceRecord> routed;  // one forward per position, in order
  routed.reserve(static_cast<std::size_t>(per_position * g.tokens));

  std::vector<std::vector<std::uint32_t>> previous(g.layers);
  std::vector<std::uint32_t> chosen;
  std::vector<std::uint8_t> taken(g.experts, 0);
  for (std::uint32_t tok = 0; tok < g.tokens; ++tok) {
    for (std::uint32_t layer = 0; layer < g.layers; ++layer) {
      chosen.clear();
      for (const std::uint32_t e : previous[layer])
        if (uniform(rng) < g.reuse) {
          chosen.push_back(e);
          taken[e] = 1;
        }
      draw_fresh(g, pop, layer, rng, chosen, taken);
      for (const std::uint32_t e : chosen) {
        routed.push_back(TraceRecord{tok, static_cast<std::uint16_t>(layer), static_cast<std::uint16_t>(e)});
        taken[e] = 0;
      }
      previous[layer] = chosen;
    }
  }
  if (g.recompute_prompt == 0) {
    t.records = std::move(routed);
  } else {
    // Full recompute: step by step, every position from 0 to the newest is fed again, and
    // (the model being deterministic) routes exactly as it did the first time.
    t.records.reserve(static_cast<std::size_t>(total));
    for (std::uint64_t end = g.recompute_prompt; end <= g.tokens; ++end)
      t.records.insert(t.records.end(), routed.begin(),
                       routed.begin() + static_cast<std::ptrdiff_t>(end * per_position));
  }
  // One token at a time: each token-layer is served on its own.
  group_by_token_layer(t);
  t.header.record_count = t.records.size();
  return t;
}

}  // namespace k3
