#include <k3/draft_model.hpp>

#include <algorithm>
#include <cmath>

#include <k3/error.hpp>

namespace k3 {
namespace {

/// Probability of `token` under softmax(logits / temperature); a greedy run (temperature
/// 0) is scored at temperature 1.
double probability_of(std::span<const float> logits, std::uint32_t token, double temperature) {
  const double t = temperature > 0 ? temperature : 1.0;
  const float top = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (const float l : logits) sum += std::exp((static_cast<double>(l) - top) / t);
  return std::exp((static_cast<double>(logits[token]) - top) / t) / sum;
}

}  // namespace

DraftModel::DraftModel(std::unique_ptr<Model> model, const ModelConfig& target, const std::string& what)
    : model_(std::move(model)), sampler_(static_cast<std::size_t>(model_->config().vocab_size)) {
  const ModelConfig& c = model_->config();
  const std::string at = (what.empty() ? std::string() : what + ": ") + model_->uri() + ": ";
  if (c.vocab_size != target.vocab_size || c.bos_token_id != target.bos_token_id ||
      c.eos_token_id != target.eos_token_id)
    throw UsageError(at + "not a draft model for this model: its vocabulary (" + std::to_string(c.vocab_size) +
                     " ids, BOS " + std::to_string(c.bos_token_id) + ", EOS " + std::to_string(c.eos_token_id) +
                     ") is not the model's (" + std::to_string(target.vocab_size) + " ids, BOS " +
                     std::to_string(target.bos_token_id) + ", EOS " + std::to_string(target.eos_token_id) +
                     "); a draft model must share the model's tokenizer");
  if (model_->streaming())
    throw UsageError(at + "the draft model does not fit in memory (its plan streams; " + model_->plan().summary() +
                     "): a draft model runs for every drafted token and must be resident");
  session_ = std::make_unique<Session>(*model_, model_->plan().context);
}

DraftModel::~DraftModel() = default;

std::uint64_t DraftModel::resident_bytes() const noexcept { return model_->plan().total; }

void DraftModel::feed(std::span<const std::uint32_t> tokens) {
  // In the plan's chunks, so the session's buffers never grow.
  const std::size_t chunk = std::max<std::size_t>(1, model_->plan().buffers.chunk);
  for (std::size_t at = 0; at < tokens.size(); at += chunk) {
    const std::size_t n = std::min(chunk, tokens.size() - at);
    session_->feed(tokens.subspan(at, n), false, logits_);
    ++calls_;
    tokens_ += n;
  }
}

std::vector<std::uint32_t> DraftModel::draft(std::span<const std::uint32_t> context, std::size_t n,
                                             const SamplingSettings& sampling, double min_p) {
  std::lock_guard lock(mutex_);
  drafts_.clear();
  if (n == 0 || context.empty()) return drafts_;
  // Room for the context and the n - 1 drafts fed back to draw the next one.
  if (static_cast<std::int64_t>(context.size() + n - 1) > session_->max_positions()) return drafts_;
  // Go on from the last context when this one extends it (the usual case: the tokens the
  // target kept since); otherwise (another conversation, an edited one) start over.
  const std::vector<std::uint32_t>& had = synced_.tokens();
  const bool extends = !synced_.empty() && had.size() < context.size() &&
                       std::equal(had.begin(), had.end(), context.begin());
  if (extends) {
    session_->restore(synced_);
  } else {
    session_->reset();
  }
  const std::size_t from = extends ? had.size() : 0;
  feed(context.subspan(from));
  synced_ = session_->snapshot();
  auto position = static_cast<std::int64_t>(context.size());
  const auto vocab = static_cast<std::size_t>(model_->config().vocab_size);
  // Drawn like the model's: with the repeat penalty over the context and the drafts so far.
  const bool penalizes = sampling.penalizes();
  if (penalizes) history_.assign(context.begin(), context.end());
  for (;;) {
    const std::uint32_t t = sampler_.sample(logits_.data(), sampling, position, history_);
    // A token the draft model itself doubts is seldom the model's: stop before it.
    if (min_p > 0 && probability_of(std::span(logits_).first(vocab), t, sampling.temperature) < min_p) break;
    drafts_.push_back(t);
    if (penalizes) history_.push_back(t);
    if (drafts_.size() == n) break;
    feed({&t, 1});
    ++position;
  }
  return drafts_;
}

}  // namespace k3
