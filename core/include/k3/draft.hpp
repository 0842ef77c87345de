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
