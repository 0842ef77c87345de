// A draft model for exact speculative decoding (docs/speculative.md, "A draft model"): a
// small model with the target model's tokenizer, held in memory, that proposes the next
// tokens as it would write them itself. The target model checks every drafted token, so the
// draft model changes how many tokens one forward pass of the target yields, never which.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <k3/generate.hpp>
#include <k3/model.hpp>

namespace k3 {

class DraftModel {
 public:
  /// Takes a loaded model. UsageError, naming `what` (where the draft model was given; empty
  /// when the caller names it itself) and the model's path, when
  /// it streams (a draft model must be resident: it runs for every drafted token) or when
  /// its vocabulary size, BOS or EOS differ from `target`'s (another tokenizer: its ids would
  /// mean other text).
  DraftModel(std::unique_ptr<Model> model, const ModelConfig& target, const std::string& what);
  ~DraftModel();
  DraftModel(const DraftModel&) = delete;
  DraftModel& operator=(const DraftModel&) = delete;

  /// Up to `n` tokens continuing `context`, each picked from the draft model's logits with
  /// `sampling` at its position (the position the target samples that token at), so a draft
  /// model close to the target often draws the very token the target draws, greedy or
  /// seeded. Empty when the context does not fit the draft model's context. Keeps one
  /// conversation: a context that extends the last one costs only its new tokens; any other
  /// starts over. Stops early at a token the draft model gives less than `min_p` probability
  /// (softmax at the sampling temperature, 1 when greedy), without that token. Calls are
  /// serialised.
  [[nodiscard]] std::vector<std::uint32_t> draft(std::span<const std::uint32_t> context, std::size_t n,
                                                 const SamplingSettings& sampling, double min_p = 0.0);

  [[nodiscard]] const Model& model() const noexcept { return *model_; }
  /// Bytes of weights the draft model holds in memory (beside the target's plan).
  [[nodiscard]] std::uint64_t resident_bytes() const noexcept;
  /// Draft-model forward calls and the tokens they ran, since it was loaded.
  [[nodiscard]] std::uint64_t forward_calls() const noexcept { return calls_; }
  [[nodiscard]] std::uint64_t forward_tokens() const noexcept { return tokens_; }

 private:
  void feed(std::span<const std::uint32_t> tokens);

  std::unique_ptr<Model> model_;
  std::unique_ptr<Session> session_;
  /// The state after the last context fed (none of that call's drafts): where the next call
  /// goes on from.
  SessionSnapshot synced_;
  Sampler sampler_;
  std::vector<float> logits_;
  std::vector<std::uint32_t> drafts_;
  std::vector<std::uint32_t> history_;  ///< context and drafts, for the repeat penalty
  std::uint64_t calls_ = 0, tokens_ = 0;
  std::mutex mutex_;
};

}  // namespace k3
