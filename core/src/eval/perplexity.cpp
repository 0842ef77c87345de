// Sliding-window perplexity (k3/perplexity.hpp). The only arithmetic of its own is the
// fp64 log-softmax of one logits row and the running sum of scores, both in a fixed order,
// so the result inherits the logits' bit-identity.
#include <k3/perplexity.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include <k3/error.hpp>

namespace k3 {

std::vector<PerplexityWindow> perplexity_windows(std::int64_t n, std::int64_t window, std::int64_t stride) {
  if (window < 2) throw UsageError("perplexity: the window must hold at least 2 ids, got " + std::to_string(window));
  // A window's first id has no context inside it, so consecutive windows must overlap by
  // at least one id for every id to be scored once.
  if (stride < 1 || stride >= window)
    throw UsageError("perplexity: the stride must be between 1 and the window minus one (" +
                     std::to_string(window - 1) + "), got " + std::to_string(stride) +
                     " (windows must overlap, or the id at each window's start would go unscored)");
  std::vector<PerplexityWindow> out;
  if (n < 2) return out;
  std::int64_t scored_to = 1;  // id 0 has no context: it is never scored
  for (std::int64_t start = 0;; start += stride) {
    const std::int64_t end = std::min(start + window, n);
    out.push_back({start, end, scored_to});
    scored_to = end;
    if (end == n) break;
  }
  return out;
}

double token_nll(std::span<const float> logits, std::uint32_t target) {
  double max = -std::numeric_limits<double>::infinity();
  for (const float x : logits) max = std::max(max, static_cast<double>(x));
  double sum = 0;
  for (const float x : logits) sum += std::exp(static_cast<double>(x) - max);
  return max + std::log(sum) - static_cast<double>(logits[target]);
}

std::int64_t checked_stride(const PerplexitySettings& settings) {
  if (settings.stride < 0)
    throw UsageError("perplexity: the stride must be 0 (half the window) or more, got " +
                     std::to_string(settings.stride));
  if (settings.chunk < 1)
    throw UsageError("perplexity: the chunk must be at least 1 id, got " + std::to_string(settings.chunk));
  const std::int64_t stride = settings.stride > 0 ? settings.stride : std::max<std::int64_t>(1, settings.window / 2);
  (void)perplexity_windows(2, settings.window, stride);  // refuses a window or stride that leaves ids unscored
  return stride;
}

double PerplexityResult::mean_nll() const noexcept {
  return scored > 0 ? nll_sum / static_cast<double>(scored) : std::numeric_limits<double>::quiet_NaN();
}

double PerplexityResult::perplexity() const noexcept { return std::exp(mean_nll()); }

PerplexityResult perplexity(Model& model, std::span<const std::uint32_t> ids, const PerplexitySettings& settings) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t n = static_cast<std::int64_t>(ids.size());
  const std::int64_t stride = checked_stride(settings);
  if (n < 2)
    throw UsageError("perplexity: the text has " + std::to_string(n) + " token(s) with BOS; at least 2 are needed");
  const std::vector<PerplexityWindow> windows = perplexity_windows(n, settings.window, stride);
  const auto vocab = static_cast<std::size_t>(model.config().vocab_size);
  for (std::int64_t i = 0; i < n; ++i)
    if (ids[static_cast<std::size_t>(i)] >= vocab)
      throw UsageError("perplexity: id " + std::to_string(ids[static_cast<std::size_t>(i)]) + " at position " +
                       std::to_string(i) + " is outside the vocabulary (" + std::to_string(vocab) + ")");
  const std::size_t failures_before = model.stream_stats().expert_failures.size();

  PerplexityResult r;
  r.ids = n;
  r.window = settings.window;
  r.stride = stride;
  Session session(model, settings.window);
  std::vector<float> logits;
  for (const PerplexityWindow& w : windows) {
    session.reset();
    ++r.windows;
    for (std::int64_t pos = w.start; pos < w.end; pos += settings.chunk) {
      const std::int64_t len = std::min(settings.chunk, w.end - pos);
      session.feed(ids.subspan(static_cast<std::size_t>(pos), static_cast<std::size_t>(len)), true, logits);
      // Row j predicts the id at pos + j + 1.
      for (std::int64_t j = 0; j < len; ++j) {
        const std::int64_t target = pos + j + 1;
        if (target < w.first_scored || target >= w.end) continue;
        const std::span<const float> row(logits.data() + static_cast<std::size_t>(j) * vocab, vocab);
        r.nll_sum += token_nll(row, ids[static_cast<std::size_t>(target)]);
        ++r.scored;
      }
      if (settings.on_progress) settings.on_progress(r.scored, n - 1);
      if (settings.stop != nullptr && settings.stop->load()) {
        r.interrupted = true;
        break;
      }
    }
    if (r.interrupted) break;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // A routed expert that could not be read contributed zeros: the scores are not the model's.
  const auto failures = model.stream_stats().expert_failures;
  if (failures.size() > failures_before)
    throw Error(ExitCode::expert_failure, "perplexity: routed expert failed (" + failures[failures_before] +
                                              "); its contributions were zero, so the scores are unsound");
  return r;
}

std::string perplexity_json(const PerplexityResult& r, const PerplexitySource& source) {
  nlohmann::json j;
  j["format"] = "k3host-perplexity-v1";
  j["text_file"] = source.text_file;
  j["model"] = source.model;
  j["kernels"] = source.kernels;
  j["threads"] = source.threads;
  j["ids"] = r.ids;
  j["scored"] = r.scored;
  j["windows"] = r.windows;
  j["window"] = r.window;
  j["stride"] = r.stride;
  j["nll_sum"] = r.nll_sum;
  // JSON has no NaN: nothing scored (an interrupt before the first chunk) is null.
  j["mean_nll"] = r.scored > 0 ? nlohmann::json(r.mean_nll()) : nlohmann::json(nullptr);
  j["perplexity"] = r.scored > 0 ? nlohmann::json(r.perplexity()) : nlohmann::json(nullptr);
  j["seconds"] = r.seconds;
  j["interrupted"] = r.interrupted;
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace k3
