// Generation: prefill in chunks, then one token per step with carried state (or full
// recompute), greedy or seeded sampling, stop at EOS or the token limit; the run report.
#pragma once
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <k3/draft.hpp>
#include <k3/model.hpp>
#include <k3/sampler.hpp>

namespace k3 {

class DraftModel;

enum class DecodeMode { incremental, recompute };

/// Exact speculative decoding (docs/speculative.md): after each generated token, up to
/// max_draft tokens are drafted by a draft `model` when there is one, else by prompt lookup
/// (what followed the latest earlier occurrence of the context's last `ngram` tokens, or of
/// shorter suffixes down to min_ngram), else from the corpus of `store`, and checked in one
/// forward pass over them all; the longest prefix equal to what the model itself picks is kept. The ids are those
/// of plain decoding, bit for bit.
struct SpeculativeSettings {
  std::int64_t max_draft = 0;  ///< 0 = off
  std::int64_t ngram = 3;      ///< longest context suffix looked up
  std::int64_t min_ngram = 1;  ///< shortest
  /// Draft fewer than max_draft when drafts are seldom kept (DraftBudget); false: always
  /// up to max_draft.
  bool adaptive = true;
  /// Drafts from a corpus (k3/draft.hpp) when the context has none; may be null.
  std::shared_ptr<const DraftStore> store;
  /// A small model with the same tokenizer that drafts (k3/draft_model.hpp); may be null.
  /// When set, it is the only draft source.
  std::shared_ptr<DraftModel> model;
  /// The draft model stops at a token it gives less than this probability (at the run's
  /// temperature, 1 when greedy): such a draft is seldom kept and its position's experts
  /// are read all the same. 0 = always up to the number of drafts allowed.
  double draft_min_p = 0.0;
};

/// What speculative decoding did in a run.
struct SpeculativeStats {
  std::uint64_t verify_passes = 0;  ///< forward passes over a token and its drafts
  std::uint64_t plain_passes = 0;   ///< forward passes over one token (nothing drafted)
  std::uint64_t drafts_proposed = 0;
  std::uint64_t drafts_accepted = 0;
  [[nodiscard]] std::uint64_t passes() const { return verify_passes + plain_passes; }
};

struct GenerateSettings {
  /// Ids fed before the first generated token, after the session's pending ids
  /// (Session::pending: a resumed conversation's last token). May be empty when the
  /// session has pending ids.
  std::vector<std::uint32_t> prompt;
  std::int64_t max_new_tokens = 16;
  DecodeMode mode = DecodeMode::incremental;
  std::int64_t prefill_chunk = 16;  ///< tokens per prefill feed() (incremental mode)
  SpeculativeSettings speculative;  ///< incremental mode only
  SamplingSettings sampling;
  bool stop_at_eos = true;
  std::uint32_t eos_token = 0;  ///< from the model config
  /// More ids that end generation like EOS when stop_at_eos (a chat turn's <|end_of_msg|>).
  std::vector<std::uint32_t> stop_tokens;
  /// When set, raw little-endian float32 logits [positions, vocab] of every position the
  /// prefill feeds: the session's pending ids, then the prompt.
  std::filesystem::path dump_logits;
  /// When set and it becomes true (a signal handler, a cancelled request), generation ends
  /// at the next boundary: between prefill chunks or after the token being produced. What
  /// was not fed stays in Session::pending, so a saved state continues exactly.
  const std::atomic<bool>* stop = nullptr;
};

/// One generated token. Its seconds cover sampling it and, except for the last token (whose
/// successor is never needed), the forward pass that feeds it back; with speculative
/// decoding a verification pass feeds several tokens and counts in the first one's step.
struct StepRecord {
  std::uint32_t token = 0;
  double seconds = 0;
  bool forward = true;  ///< the token was fed back (its successor computed); false for the last token
};

/// Why generation ended.
enum class StopReason {
  length,        ///< max_new_tokens generated (or 0 asked for)
  eos,           ///< the model's EOS or one of settings.stop_tokens
  context_full,  ///< the last token generated is one the context has no room to feed
  interrupted,   ///< settings.stop
};
/// "length", "eos", "context_full", "interrupted": the run report's stop_reason.
[[nodiscard]] const char* stop_reason_name(StopReason reason) noexcept;

struct GenerateResult {
  std::vector<std::uint32_t> pending;    ///< the session's pending ids, fed first this run
  std::vector<std::uint32_t> prompt;     ///< then these ids (GenerateSettings::prompt)
  std::vector<std::uint32_t> generated;  ///< new ids, in order
  double prefill_seconds = 0;
  std::vector<StepRecord> steps;
  bool stopped_at_eos = false;  ///< ended at EOS or one of settings.stop_tokens
  bool interrupted = false;     ///< settings.stop ended the run early
  /// Non-empty when the stop cut a forward pass short (a storage wait the backend abandoned,
  /// k3::Interrupted): what was being read. The session's state then holds part of a
  /// forward pass: it is not the conversation's and must not be saved or fed again
  /// (reset() or load() it first). interrupted is true too.
  std::string cut;
  StopReason stop_reason = StopReason::length;
  SpeculativeStats speculative;  ///< decode forward passes and drafts
};

/// The decode part of a run: the tokens fed back (`forwards`: N generated tokens feed N-1,
/// the last one's successor is never needed; speculative decoding feeds several per forward
/// pass) and every step's seconds (sampling included). Prefill excluded.
struct DecodeTiming {
  double seconds = 0;
  std::size_t forwards = 0;
  [[nodiscard]] double tokens_per_second() const { return seconds > 0 ? static_cast<double>(forwards) / seconds : 0; }
  [[nodiscard]] double seconds_per_token() const { return forwards ? seconds / static_cast<double>(forwards) : 0; }
};
[[nodiscard]] DecodeTiming decode_timing(const GenerateResult& result);

/// UsageError when `ids` more ids (a prompt, with the session's pending ids) do not fit the
/// context of `session` after what it already holds: such a prompt cannot even be fed.
void require_context_room(const Session& session, std::size_t ids);

/// Runs generation on `session` (which may already hold a resumed conversation): feeds
/// the session's pending ids and the prompt, then generates. A prompt that does not fit the
/// context is a UsageError before anything is fed (require_context_room); generation stops
/// at the context's end like at max_new_tokens (StopReason::context_full): the last token
/// is the one whose feeding would need a position past the context. The last generated token is
/// not fed (its successor is not needed): it is left as the session's pending id, and the
/// rest of a prefill stopped by `settings.stop` too, so that the next generate() or a saved
/// state continues exactly. Calls `on_token` after each generated token (for streaming
/// output); may be empty. UsageError when there is nothing to feed. A stop request that
/// cuts a forward pass short (k3::Interrupted from the storage) ends it with
/// GenerateResult::cut set.
GenerateResult generate(Session& session, const GenerateSettings& settings,
                        const std::function<void(std::uint32_t)>& on_token = {});

/// Peak resident set size of this process in bytes (getrusage).
std::uint64_t peak_rss_bytes();

}  // namespace k3
