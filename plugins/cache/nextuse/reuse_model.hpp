// The online model behind the nextuse policy: per feature bucket, a histogram of observed
// reuse gaps, from which the expected value of 1 / (time until the next use) of a key is
// read given how long it has already waited. Header-only and SDK-free, like the common helpers.
//
// Time is counted in *visits* of a key's own layer: a token (one forward) visits every MoE
// layer once, in order, so a gap of g visits is g tokens for a decode and g chunks for a
// prefill. A key's feature bucket is (its last gap, the gap before it), each quantised on
// a log scale; optionally one table per layer. Each bucket counts how many gaps started
// in it and how many ended in each gap bin; gaps still open when their key is scored are
// counted as "at risk" (Kaplan-Meier style), and gaps that never end contribute nothing,
// so a key of a bucket whose keys rarely come back scores near 0.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace k3cache {

class ReuseModel {
 public:
  /// Gap bins: bin i holds gaps in [kBinLow[i], kBinLow[i+1]); the last bin is open-ended.
  static constexpr std::array<std::uint32_t, 16> kBinLow = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 257};
  static constexpr std::size_t kBins = kBinLow.size();
  static constexpr std::size_t kGapClasses = 8;     ///< none, 1, 2, 3-4, 5-8, 9-16, 17-64, 65+
  static constexpr std::size_t kSecondClasses = 9;  ///< never accessed, once, or a gap class 1..7
  static constexpr std::size_t kBuckets = kGapClasses * kSecondClasses;
  /// A bucket with fewer started gaps than this borrows, in order, the same bucket of the
  /// global table (with per-layer tables), its table's pool of all buckets, the global pool.
  static constexpr std::uint32_t kMinEvidence = 32;

  /// `layers`: number of per-layer tables (0 = one table shared by all layers).
  void reset(std::size_t layers) {
    layers_ = layers;
    tables_.assign((layers == 0 ? 1 : layers + 1) * (kBuckets + 1), Histogram{});
  }

  /// 0 for no gap, then 1, 2, 3-4, 5-8, 9-16, 17-64, 65+ -> 1..7.
  static std::size_t gap_class(std::uint64_t gap) noexcept {
    if (gap == 0) return 0;
    return gap <= 1 ? 1 : gap <= 2 ? 2 : gap <= 4 ? 3 : gap <= 8 ? 4 : gap <= 16 ? 5 : gap <= 64 ? 6 : 7;
  }
  static std::size_t gap_bin(std::uint64_t gap) noexcept {
    std::size_t i = 0;
    while (i + 1 < kBins && gap >= kBinLow[i + 1]) ++i;
    return i;
  }
  /// The feature bucket of a key: (class of its last gap) x (class of the gap before it,
  /// or "accessed once", or "never accessed": a prefetch).
  static std::uint8_t bucket(std::uint64_t last_gap, std::uint64_t previous_gap, std::uint32_t count) noexcept {
    const std::size_t second = count == 0 ? 0 : previous_gap == 0 ? 1 : 1 + gap_class(previous_gap);
    return static_cast<std::uint8_t>(gap_class(last_gap) * kSecondClasses + second);
  }

  /// A gap starts: a key of `layer` was accessed and is now in `bucket`.
  void start(std::size_t layer, std::uint8_t b) noexcept {
    for (Histogram* h : chain(layer, b)) h->started += 1;
  }
  /// A gap of `gap` visits ended for a key that was in `bucket` when it started.
  void end(std::size_t layer, std::uint8_t b, std::uint64_t gap) noexcept {
    const std::size_t bin = gap_bin(gap);
    for (Histogram* h : chain(layer, b)) {
      h->ended[bin] += 1;
      if (h->started >= kHalveAt) h->halve();
    }
  }

  /// E[1 / T]: T = groups until the key's next use, for a key of `layer` in `bucket` that
  /// has waited `age` visits of its layer; its next visit is `first` groups away and later
  /// ones `period` groups apart (period = MoE layers per token).
  [[nodiscard]] double inverse_time(std::size_t layer, std::uint8_t b, std::uint64_t age, double first,
                                    double period) const noexcept {
    const Histogram& h = pick(layer, b);
    const std::uint64_t next_gap = age + 1;
    const std::size_t from = gap_bin(next_gap);
    double at_risk = h.started;
    for (std::size_t i = 0; i < from; ++i) at_risk -= h.ended[i];
    if (at_risk <= 0) return 0;
    // Branch-free over all bins (bins below `from` weigh 0) so the compiler can vectorise:
    // this runs for every candidate of every eviction.
    const auto next = static_cast<float>(next_gap);
    const auto f_first = static_cast<float>(first), f_period = static_cast<float>(period);
    float sum = 0;
    for (std::size_t i = 0; i < kBins; ++i) {
      const float weight = i >= from ? h.ended[i] : 0.0f;
      const float wait = std::max(kBinMid[i] - next, 0.0f);
      sum += weight / (f_first + wait * f_period);
    }
    return static_cast<double>(sum) / at_risk;
  }

 private:
  static constexpr float kHalveAt = 1u << 20;
  /// A bin's representative gap: the middle of [low, high] (the last bin: 1.5 x its low).
  static constexpr std::array<float, kBins> kBinMid = [] {
    std::array<float, kBins> mid{};
    for (std::size_t i = 0; i < kBins; ++i) {
      const float hi = i + 1 < kBins ? static_cast<float>(kBinLow[i + 1] - 1) : 2.0f * static_cast<float>(kBinLow[i]);
      mid[i] = 0.5f * (static_cast<float>(kBinLow[i]) + hi);
    }
    return mid;
  }();
  struct Histogram {
    float started = 0;
    std::array<float, kBins> ended{};
    void halve() noexcept {
      started *= 0.5f;
      for (float& e : ended) e *= 0.5f;
    }
  };

  // Index of (table, bucket); bucket kBuckets is the table's pool; table layers_ (or 0
  // with one table) is the global one.
  [[nodiscard]] std::size_t at(std::size_t table, std::size_t b) const noexcept { return table * (kBuckets + 1) + b; }
  [[nodiscard]] std::size_t table_of(std::size_t layer) const noexcept {
    return layers_ == 0 ? 0 : std::min(layer, layers_ - 1);
  }
  [[nodiscard]] std::size_t global_table() const noexcept { return layers_ == 0 ? 0 : layers_; }

  /// Every histogram an event of (layer, bucket) feeds: its bucket, its table's pool, and
  /// with per-layer tables the global bucket and pool.
  std::array<Histogram*, 4> chain(std::size_t layer, std::uint8_t b) noexcept {
    const std::size_t t = table_of(layer), g = global_table();
    if (t == g) return {&tables_[at(t, b)], &tables_[at(t, kBuckets)], &scratch_[0], &scratch_[1]};
    return {&tables_[at(t, b)], &tables_[at(t, kBuckets)], &tables_[at(g, b)], &tables_[at(g, kBuckets)]};
  }
  [[nodiscard]] const Histogram& pick(std::size_t layer, std::uint8_t b) const noexcept {
    const std::size_t t = table_of(layer), g = global_table();
    for (const std::size_t i : {at(t, b), at(g, b), at(t, kBuckets)})
      if (tables_[i].started >= kMinEvidence) return tables_[i];
    return tables_[at(g, kBuckets)];
  }

  std::size_t layers_ = 0;
  std::vector<Histogram> tables_;
  std::array<Histogram, 2> scratch_{};  // sink for the chain's unused entries with one table
};

}  // namespace k3cache
