// Drafts for exact speculative decoding (docs/speculative.md). A draft is only a guess: the
// model checks every drafted token and keeps the ones it would have picked itself, so a
// draft source changes how many tokens one forward pass yields, never which tokens.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace k3 {

/// Prompt lookup: the tokens that followed the latest earlier occurrence of the last n
/// tokens of `context`, for n = longest down to shortest (the longest match wins), at most
/// max_draft of them; empty when no such suffix occurs earlier.
std::vector<std::uint32_t> lookup_drafts(std::span<const std::uint32_t> context, std::size_t longest,
                                         std::size_t shortest, std::size_t max_draft);

/// How many tokens to draft next. A drafted token costs its position's compute and routed
/// expert reads and pays (a forward pass saved) only when it is kept, so the budget tracks
/// p, the chance that a draft is kept when the one before it was (an exponential average,
/// kRate per checked draft), and drafts the k-th token only while p^k, the chance it is
/// kept, exceeds kDraftCost, what one more position reads relative to a forward pass (at K3's
/// laptop preset a position's routed experts are about 26 of the 135 GB a pass reads). When
/// not even one draft pays, one is still tried every kProbeEvery steps, so that text turning
/// repetitive is noticed.
class DraftBudget {
 public:
  static constexpr double kRate = 0.25;
  static constexpr double kDraftCost = 0.12;
  static constexpr double kStart = 0.5;
  static constexpr std::size_t kProbeEvery = 4;

  explicit DraftBudget(std::size_t max_draft) : max_(max_draft) {}
  /// Drafts allowed at this step (0 … max_draft).
  [[nodiscard]] std::size_t next();
  /// A check of `proposed` drafts kept the first `kept`.
  void checked(std::size_t proposed, std::size_t kept);
  [[nodiscard]] double keep_rate() const noexcept { return p_; }

 private:
  std::size_t max_;
  double p_ = kStart;
  std::size_t idle_ = 0;  ///< steps since the last draft
};

/// A datastore of token ids (a corpus like the text the model will write: its training
/// text, a code base, documentation) drafted from as an n-gram model: each drafted token is
/// the most frequent successor of the longest suffix (kOrder tokens down to 2) of the context
/// and the drafts so far that occurs in the corpus, drafted only while that successor has at
/// least kMinCount occurrences and kMinShare of them. Held as the ids and a suffix array sorted by their
/// first kOrder + 1 tokens: 8 bytes per corpus token, immutable, shareable across threads.
class DraftStore {
 public:
  static constexpr std::size_t kOrder = 4;
  static constexpr std::size_t kMinCount = 2;
  static constexpr double kMinShare = 0.3;
  /// Successors counted per lookup at most (a frequent short suffix can occur everywhere).
  static constexpr std::size_t kMaxScan = 4096;

  explicit DraftStore(std::vector<std::uint32_t> ids);
  [[nodiscard]] std::size_t size() const noexcept { return ids_.size(); }
  /// Up to max_draft tokens continuing `context`; empty when no suffix of 2 or more tokens
  /// predicts confidently.
  [[nodiscard]] std::vector<std::uint32_t> draft(std::span<const std::uint32_t> context, std::size_t max_draft) const;

 private:
  /// absent: the corpus lacks `suffix`; unsure: none of its successors is frequent enough;
  /// confident: `next` is its most frequent successor (ties: the lower id).
  enum class Prediction { absent, unsure, confident };
  [[nodiscard]] Prediction predict(std::span<const std::uint32_t> suffix, std::uint32_t& next) const;
  std::vector<std::uint32_t> ids_;
  std::vector<std::uint32_t> suffixes_;  ///< start positions, ordered by their first kOrder + 1 ids
};

}  // namespace k3
