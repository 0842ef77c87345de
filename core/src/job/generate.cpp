#include <k3/generate.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>

#include <k3/draft_model.hpp>
#include <k3/error.hpp>

#include "util/atomic_file.hpp"

namespace k3 {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool stop_requested(const GenerateSettings& g) { return g.stop && g.stop->load(std::memory_order_relaxed); }

}  // namespace

std::uint64_t peak_rss_bytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<std::uint64_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

DecodeTiming decode_timing(const GenerateResult& r) {
  DecodeTiming t;
  for (const auto& s : r.steps) {
    t.seconds += s.seconds;
    t.forwards += s.forward ? 1 : 0;
  }
  return t;
}

namespace {

using Clock = std::chrono::steady_clock;

/// The decode part of generate(): sample, hand out, feed back; with speculative decoding,
/// feed a token together with its drafts and keep what the model confirms.
class DecodeLoop {
 public:
  DecodeLoop(Session& session, const GenerateSettings& g, const std::function<void(std::uint32_t)>& on_token,
             GenerateResult& r, std::size_t vocab)
      : session_(session), g_(g), on_token_(on_token), r_(r), sampler_(vocab), vocab_(vocab) {
    // At most one token more than the context still holds can be generated.
    const std::int64_t room = session.max_positions() - session.position() + 1;
    const auto planned = static_cast<std::size_t>(std::max<std::int64_t>(0, std::min(g.max_new_tokens, room)));
    r.generated.reserve(planned);
    r.steps.reserve(planned);
  }

  /// `last`: the logits after the prompt.
  void run(std::vector<float>& last) {
    r_.stop_reason = StopReason::length;
    if (g_.max_new_tokens <= 0) return;
    auto ts = Clock::now();
    std::uint32_t next = sample(last.data(), session_.position(), session_.tokens());
    if (emit(next, session_.position())) return finish(next, ts);
    std::vector<float> logits;
    for (;;) {
      const std::vector<std::uint32_t> drafts = draft(next);
      if (drafts.empty()) {
        if (g_.mode == DecodeMode::recompute) {
          std::vector<std::uint32_t> all = session_.tokens();
          all.push_back(next);
          session_.reset();
          session_.feed(all, false, logits);
        } else {
          session_.feed({&next, 1}, false, logits);
        }
        ++r_.speculative.plain_passes;
        r_.steps.push_back({next, seconds_since(ts), true});
        ts = Clock::now();
        next = sample(logits.data(), session_.position(), session_.tokens());
        if (emit(next, session_.position())) return finish(next, ts);
        continue;
      }
      if (verify(next, drafts, logits, ts)) return;
    }
  }

 private:
  /// `context`: every id before the one picked (what the repeat penalty looks back over).
  std::uint32_t sample(const float* logits, std::int64_t position, std::span<const std::uint32_t> context) {
    return sampler_.sample(logits, g_.sampling, position, context);
  }

  /// Hands `t` out as generated; true when generation ends with it (EOS, a stop id, the
  /// token limit, a stop request, or the end of the context). `position` is where `t`
  /// would be fed: a token with no room left in the context is the last one.
  bool emit(std::uint32_t t, std::int64_t position) {
    r_.generated.push_back(t);
    if (on_token_) on_token_(t);
    const bool is_eos = g_.stop_at_eos && (t == g_.eos_token || std::find(g_.stop_tokens.begin(),
                                                                           g_.stop_tokens.end(), t) != g_.stop_tokens.end());
    r_.interrupted = !is_eos && stop_requested(g_);
    r_.stopped_at_eos = is_eos;
    if (is_eos) r_.stop_reason = StopReason::eos;
    else if (r_.interrupted) r_.stop_reason = StopReason::interrupted;
    else if (static_cast<std::int64_t>(r_.generated.size()) >= g_.max_new_tokens) r_.stop_reason = StopReason::length;
    else if (position >= session_.max_positions()) r_.stop_reason = StopReason::context_full;
    else return false;
    return true;
  }

  /// The last token: its successor is not needed now, so the conversation keeps it to feed
  /// first next time.
  void finish(std::uint32_t last_token, Clock::time_point ts) {
    r_.steps.push_back({last_token, seconds_since(ts), false});
    session_.set_pending({last_token});
  }

  /// Drafts to check after `next`, fitted to the tokens still wanted (the last one is never
  /// fed) and to the context.
  std::vector<std::uint32_t> draft(std::uint32_t next) {
    if (g_.mode != DecodeMode::incremental || g_.speculative.max_draft <= 0) return {};
    const std::int64_t wanted = g_.max_new_tokens - static_cast<std::int64_t>(r_.generated.size()) - 1;
    const std::int64_t room = session_.max_positions() - session_.position() - 1;
    const std::int64_t allowed =
        g_.speculative.adaptive ? static_cast<std::int64_t>(budget_.next()) : g_.speculative.max_draft;
    const std::int64_t most = std::min({allowed, wanted, room});
    if (most <= 0) return {};
    context_.assign(session_.tokens().begin(), session_.tokens().end());
    context_.push_back(next);
    const SpeculativeSettings& s = g_.speculative;
    const auto n = static_cast<std::size_t>(most);
    // A draft model writes like the model; a context match only where text repeats.
    if (s.model) return s.model->draft(context_, n, g_.sampling, s.draft_min_p);
    // A context match of 2 tokens or more, else the corpus, else a shorter context match:
    // a single repeated token predicts worse than a corpus that knows the phrase.
    const auto longest = static_cast<std::size_t>(s.ngram), shortest = static_cast<std::size_t>(s.min_ngram);
    if (!s.store) return lookup_drafts(context_, longest, shortest, n);
    std::vector<std::uint32_t> drafts = lookup_drafts(context_, longest, std::max<std::size_t>(shortest, 2), n);
    if (drafts.empty()) drafts = s.store->draft(context_, n);
    if (drafts.empty() && shortest < 2) drafts = lookup_drafts(context_, 1, shortest, n);
    return drafts;
  }

  /// Feeds next and its drafts in one pass and keeps next plus the drafts the model
  /// confirms: row i of the logits picks the successor of token i exactly as a sequential
  /// run would (same bits, same (seed, position) draw). Every picked token is handed out in
  /// order; a draft that differs from the pick ends the check and the pick is the next
  /// token. Returns true when generation ended.
  bool verify(std::uint32_t& next, const std::vector<std::uint32_t>& drafts, std::vector<float>& logits,
              Clock::time_point& ts) {
    batch_.assign(1, next);
    batch_.insert(batch_.end(), drafts.begin(), drafts.end());
    const std::int64_t pos0 = session_.position();
    const std::uint64_t accepted_before = r_.speculative.drafts_accepted;
    // Row i picks the successor of batch_[i]: its context is what the session held, then
    // batch_[0..i] (kept only when the repeat penalty needs it).
    const bool penalizes = g_.sampling.penalizes();
    if (penalizes) history_.assign(session_.tokens().begin(), session_.tokens().end());
    bool ended = false;
    std::exception_ptr failure;  // from on_token: thrown once the state is consistent
    session_.feed_tentative(batch_, logits, [&](std::span<const float> rows) {
      ++r_.speculative.verify_passes;
      r_.speculative.drafts_proposed += drafts.size();
      std::size_t keep = 1;  // next
      r_.steps.push_back({next, seconds_since(ts), true});
      for (std::size_t i = 0; i <= drafts.size(); ++i) {
        ts = Clock::now();
        const std::int64_t at = pos0 + 1 + static_cast<std::int64_t>(i);
        if (penalizes) history_.push_back(batch_[i]);
        const std::uint32_t t = sample(rows.data() + i * vocab_, at, history_);
        try {
          ended = emit(t, at);
        } catch (...) {
          // As in a sequential run: what came before t was fed, t was not.
          failure = std::current_exception();
          return keep;
        }
        if (ended) {
          finish_step_ = {t, seconds_since(ts), false};
          return keep;
        }
        if (i < drafts.size() && t == drafts[i]) {
          ++keep;
          ++r_.speculative.drafts_accepted;
          r_.steps.push_back({t, seconds_since(ts), true});
          continue;
        }
        next = t;  // the model's own pick: checked (and fed) next round
        return keep;
      }
      return keep;  // not reached: the last row's pick always ends the check
    });
    budget_.checked(drafts.size(), r_.speculative.drafts_accepted - accepted_before);
    if (failure) std::rethrow_exception(failure);
    if (ended) {
      r_.steps.push_back(finish_step_);
      session_.set_pending({finish_step_.token});
    }
    return ended;
  }

  Session& session_;
  const GenerateSettings& g_;
  const std::function<void(std::uint32_t)>& on_token_;
  GenerateResult& r_;
  Sampler sampler_;
  std::size_t vocab_;
  std::vector<std::uint32_t> context_, batch_, history_;
  DraftBudget budget_{static_cast<std::size_t>(std::max<std::int64_t>(0, g_.speculative.max_draft))};
  StepRecord finish_step_;
};

/// generate() after its checks: prefill, then decode, into `r`.
void run_generation(Session& session, const GenerateSettings& g, const std::function<void(std::uint32_t)>& on_token,
                    const std::vector<std::uint32_t>& input, std::optional<AtomicFile>& dump,
                    std::chrono::steady_clock::time_point t0, GenerateResult& r);

}  // namespace

const char* stop_reason_name(StopReason reason) noexcept {
  switch (reason) {
    case StopReason::length: return "length";
    case StopReason::eos: return "eos";
    case StopReason::context_full: return "context_full";
    case StopReason::interrupted: return "interrupted";
  }
  return "length";
}

void require_context_room(const Session& session, std::size_t ids) {
  const std::int64_t held = session.position(), room = session.max_positions() - held;
  if (static_cast<std::int64_t>(ids) <= room) return;
  throw UsageError("the prompt does not fit the context: " + std::to_string(ids) + " tokens" +
                   (held > 0 ? " after the " + std::to_string(held) + " of the loaded conversation" : std::string()) +
                   " exceed memory.context " + std::to_string(session.max_positions()) +
                   " (raise it: -c/--context N)");
}

GenerateResult generate(Session& session, const GenerateSettings& g, const std::function<void(std::uint32_t)>& on_token) {
  GenerateResult r;
  r.prompt = g.prompt;
  r.pending = session.pending();
  // The ids this run feeds before its first token: what the session holds unfed (a resumed
  // conversation's last token), then the prompt.
  std::vector<std::uint32_t> input = session.pending();
  input.insert(input.end(), g.prompt.begin(), g.prompt.end());
  if (input.empty())
    throw UsageError(session.position() == 0
                         ? "nothing to continue: the prompt is empty and no state was loaded"
                         : "nothing to continue from: every id of the conversation was fed and its last logits are "
                           "not kept (a state saved after a prefill-only run); give a prompt to continue it");
  if (g.prefill_chunk < 1) throw UsageError("job.prefill_chunk must be >= 1");
  require_context_room(session, input.size());
  std::optional<AtomicFile> dump;  // appears complete after the prefill, or not at all
  if (!g.dump_logits.empty()) {
    try {
      dump.emplace(g.dump_logits);
    } catch (const RuntimeError& e) {
      throw UsageError(g.dump_logits.string() + ": cannot write the logits dump (" + e.what() + ")");
    }
  }
  // The session's pending ids are part of `input` now; a prefill stopped early puts back
  // what it did not feed.
  session.set_pending({});
  const auto t0 = std::chrono::steady_clock::now();
  try {
    run_generation(session, g, on_token, input, dump, t0, r);
  } catch (const Interrupted& e) {
    // A storage wait abandoned on the stop request: the forward pass it was in is cut.
    r.interrupted = true;
    r.stop_reason = StopReason::interrupted;
    r.cut = e.what();
    if (r.prefill_seconds == 0) r.prefill_seconds = seconds_since(t0);
  }
  return r;
}

namespace {

void run_generation(Session& session, const GenerateSettings& g, const std::function<void(std::uint32_t)>& on_token,
                    const std::vector<std::uint32_t>& input, std::optional<AtomicFile>& dump,
                    std::chrono::steady_clock::time_point t0, GenerateResult& r) {
  std::vector<float> logits, last;
  // Prefill: the input in chunks (or all at once in recompute mode).
  const bool want_all = dump.has_value();
  const std::size_t chunk = g.mode == DecodeMode::recompute ? input.size() : static_cast<std::size_t>(g.prefill_chunk);
  if (g.mode == DecodeMode::recompute && session.position() > 0) {
    // Recompute from the very first token, including a resumed conversation.
    std::vector<std::uint32_t> all = session.tokens();
    all.insert(all.end(), input.begin(), input.end());
    session.reset();
    session.feed(all, want_all, logits);
    if (want_all) {
      const std::size_t V = logits.size() / all.size();
      dump->write(logits.data() + (all.size() - input.size()) * V, input.size() * V * sizeof(float));
    }
    const std::size_t V = want_all ? logits.size() / all.size() : logits.size();
    last.assign(logits.end() - static_cast<std::ptrdiff_t>(V), logits.end());
  } else {
    for (std::size_t at = 0; at < input.size(); at += chunk) {
      if (stop_requested(g)) {
        session.set_pending({input.begin() + static_cast<std::ptrdiff_t>(at), input.end()});
        r.interrupted = true;
        r.stop_reason = StopReason::interrupted;
        r.prefill_seconds = seconds_since(t0);
        return;
      }
      const std::size_t n = std::min(chunk, input.size() - at);
      session.feed({input.data() + at, n}, want_all, logits);
      if (want_all)
        dump->write(logits.data(), logits.size() * sizeof(float));
      const std::size_t V = logits.size() / (want_all ? n : 1);
      last.assign(logits.end() - static_cast<std::ptrdiff_t>(V), logits.end());
    }
  }
  r.prefill_seconds = seconds_since(t0);
  if (dump) dump->commit();

  DecodeLoop loop(session, g, on_token, r, last.size());
  loop.run(last);
}

}  // namespace

}  // namespace k3
