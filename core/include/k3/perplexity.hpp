// Perplexity of a model over a token sequence, with sliding windows (docs/demo-model.md,
// "Perplexity"):
//
//   windows of `window` ids start at 0, stride, 2·stride, … (the last one cut at the end);
//   each is fed from a fresh session in chunks, with every position's logits; a window
//   scores only the ids no earlier window scored (the first scores ids 1 … window−1, each
//   later one the ids after the previous window's end); the score of id t at position p is
//   −log softmax(logits of position p−1)[t], computed in fp64 from the fp32 logits.
//   perplexity = exp(mean score).
//
// The same definition is implemented over the float64 PyTorch reference
// (tools/train/perplexity.py). Exactness: the logits are bit-identical across kernel sets,
// thread counts, budgets and chunkings (docs/model-spec.md §5), and the fp64 sums run in one
// fixed order, so the result's bits are too.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <k3/model.hpp>

namespace k3 {

/// One window: ids [start, end) are fed; ids [first_scored, end) are scored.
struct PerplexityWindow {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::int64_t first_scored = 0;
};

/// The windows over `n` ids: UsageError for window < 2, or a stride outside 1 … window − 1
/// (windows must overlap, or an id at a window's start would go unscored). Empty when n < 2 (nothing to score).
std::vector<PerplexityWindow> perplexity_windows(std::int64_t n, std::int64_t window, std::int64_t stride);

struct PerplexitySettings {
  std::int64_t window = 256;  ///< ids a window feeds (the most context any score sees)
  std::int64_t stride = 0;    ///< ids between window starts; 0 = window / 2
  std::int64_t chunk = 64;    ///< ids per feed() inside a window
  /// When set and it becomes true, scoring stops after the current chunk; the result holds
  /// what was scored until then (interrupted).
  const std::atomic<bool>* stop = nullptr;
  /// Called after every chunk: ids scored so far, of the total to score.
  std::function<void(std::int64_t scored, std::int64_t total)> on_progress;
};

/// The stride `settings` means (0: window / 2). UsageError for a window < 2, a negative
/// stride or one that leaves ids unscored (perplexity_windows), or a chunk < 1: perplexity()
/// checks this first, and a caller may check before loading a model.
std::int64_t checked_stride(const PerplexitySettings& settings);

struct PerplexityResult {
  std::int64_t ids = 0;      ///< length of the sequence evaluated
  std::int64_t scored = 0;   ///< ids scored (ids − 1 when not interrupted)
  std::int64_t windows = 0;  ///< windows fed (in part, when interrupted)
  std::int64_t window = 0, stride = 0;
  double nll_sum = 0;  ///< Σ −log p, natural log, in scoring order
  double seconds = 0;
  bool interrupted = false;
  [[nodiscard]] double mean_nll() const noexcept;    ///< nll_sum / scored (NaN when nothing scored)
  [[nodiscard]] double perplexity() const noexcept;  ///< exp(mean_nll())
};

/// Scores `ids` with `model`. UsageError for an id outside the vocabulary, bad window
/// settings, or fewer than two ids.
PerplexityResult perplexity(Model& model, std::span<const std::uint32_t> ids, const PerplexitySettings& settings);

/// Where a result came from, for its JSON form.
struct PerplexitySource {
  std::string text_file;  ///< the text scored
  std::string model;      ///< model.path
  std::string kernels;
  int threads = 0;
};

/// The result as one JSON object (k3host perplexity --json): every count, the sums as
/// round-trip doubles, and `source`.
std::string perplexity_json(const PerplexityResult& r, const PerplexitySource& source);

/// −log softmax(logits)[target] in fp64: max, then Σ exp(x − max) in index order.
double token_nll(std::span<const float> logits, std::uint32_t target);

}  // namespace k3
