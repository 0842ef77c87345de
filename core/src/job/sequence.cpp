// k3::Sequence (k3/scheduler.hpp): one generation as steps (job/sequence_impl.hpp):
// prefill in chunks, then sample, hand out and feed back each token; with speculative
// decoding a token is fed with its drafts and the ones the model confirms are kept.
#include "job/sequence_impl.hpp"

#include <algorithm>

#include <k3/draft_model.hpp>
#include <k3/error.hpp>

namespace k3 {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// The pick after the last row of a feed that asked for picks.
std::uint32_t last_pick(std::span<const std::uint32_t> picks) {
  if (picks.empty()) throw RuntimeError("a pass answered a generation's feed with no pick");
  return picks.back();
}

}  // namespace

Sequence::Impl::Impl(Session& s, const GenerateSettings& settings, std::function<void(std::uint32_t)> tokens,
                     SequenceHooks h)
    : session(s),
      g(settings),
      on_token(std::move(tokens)),
      hooks(std::move(h)),
      vocab_(static_cast<std::size_t>(s.model().config().vocab_size)),
      budget_(static_cast<std::size_t>(std::max<std::int64_t>(0, settings.speculative.max_draft))) {
  r.prompt = g.prompt;
  r.pending = session.pending();
  // The ids this run feeds before its first token: what the session holds unfed (a resumed
  // conversation's last token), then the prompt.
  input_ = session.pending();
  input_.insert(input_.end(), g.prompt.begin(), g.prompt.end());
  if (input_.empty())
    throw UsageError(session.position() == 0
                         ? "nothing to continue: the prompt is empty and no state was loaded"
                         : "nothing to continue from: every id of the conversation was fed and its last logits are "
                           "not kept (a state saved after a prefill-only run); give a prompt to continue it");
  if (g.prefill_chunk < 1) throw UsageError("job.prefill_chunk must be >= 1");
  require_context_room(session, input_.size());
  if (!g.dump_logits.empty()) {  // appears complete after the prefill, or not at all
    try {
      dump_.emplace(g.dump_logits);
    } catch (const RuntimeError& e) {
      throw UsageError(g.dump_logits.string() + ": cannot write the logits dump (" + e.what() + ")");
    }
  }
  // The session's pending ids are part of the input now; a prefill stopped early puts back
  // what it did not feed.
  session.set_pending({});
}

bool Sequence::Impl::plan(std::size_t& prefill_left, BatchFeed& feed) {
  if (!started_) {
    started_ = true;
    t0_ = Clock::now();
  }
  tentative_ = false;
  drafts_ = 0;
  keep_ = 0;
  const bool fed = prefill ? plan_prefill(prefill_left, feed) : plan_decode(feed);
  if (fed) {
    feed.session = &session;
    feed.tokens = feed_;
    feed.tentative = tentative_;
  }
  return fed;
}

void Sequence::Impl::end_interrupted_before_feed() {
  r.interrupted = true;
  r.stop_reason = StopReason::interrupted;
  done = true;
}

bool Sequence::Impl::plan_prefill(std::size_t& prefill_left, BatchFeed& feed) {
  if (stop_requested()) {
    session.set_pending({input_.begin() + static_cast<std::ptrdiff_t>(fed_), input_.end()});
    r.prefill_seconds = seconds_since(t0_);
    end_interrupted_before_feed();
    return false;
  }
  // A dump wants every row's logits; only the last chunk's last row picks (the first token).
  feed.all_positions = dump_.has_value();
  feed.logits = dump_.has_value();
  feed.pick = nullptr;
  if (g.mode == DecodeMode::recompute) {
    // The whole input at once, from the very first token of a resumed conversation.
    feed_ = session.tokens();
    feed_.insert(feed_.end(), input_.begin(), input_.end());
    if (session.position() > 0) session.reset();
    feed.pick = &g.sampling;
    return true;
  }
  std::size_t n = std::min({static_cast<std::size_t>(g.prefill_chunk), input_.size() - fed_, prefill_left});
  // A chunk ends at the owner's marks (a snapshot of the prompt there).
  const std::int64_t pos = session.position();
  for (std::int64_t mark : hooks.prefill_marks)
    if (mark > pos) {
      n = std::min(n, static_cast<std::size_t>(mark - pos));
      break;
    }
  if (n == 0) return false;  // no budget left this step
  prefill_left -= n;
  feed_.assign(input_.begin() + static_cast<std::ptrdiff_t>(fed_),
               input_.begin() + static_cast<std::ptrdiff_t>(fed_ + n));
  if (fed_ + n == input_.size()) feed.pick = &g.sampling;
  return true;
}

bool Sequence::Impl::plan_decode(BatchFeed& feed) {
  if (stop_requested()) {
    // Its last token was handed out: it stays pending, as when a stop ends generation at it.
    end_interrupted_before_feed();
    finish(next_, ts_);
    return false;
  }
  feed.all_positions = false;
  feed.logits = false;
  feed.pick = &g.sampling;
  const std::vector<std::uint32_t> drafts = draft(next_);
  if (drafts.empty() && g.mode == DecodeMode::recompute) {
    feed_ = session.tokens();
    feed_.push_back(next_);
    session.reset();
    return true;
  }
  feed_.assign(1, next_);
  feed_.insert(feed_.end(), drafts.begin(), drafts.end());
  drafts_ = drafts.size();
  tentative_ = drafts_ != 0;
  if (tentative_) {
    accepted_before_ = r.speculative.drafts_accepted;
    ended_ = false;
    verify_failure_ = nullptr;
  }
  return true;
}

void Sequence::Impl::absorb(std::span<const float> rows, std::span<const std::uint32_t> picks) {
  if (prefill) return absorb_prefill(rows, picks);
  if (tentative_) return verify(picks);
  ++r.speculative.plain_passes;
  r.steps.push_back({next_, seconds_since(ts_), true});
  ts_ = Clock::now();
  next_ = last_pick(picks);
  if (emit(next_, session.position())) {
    finish(next_, ts_);
    done = true;
  }
}

void Sequence::Impl::absorb_prefill(std::span<const float> rows, std::span<const std::uint32_t> picks) {
  if (g.mode == DecodeMode::recompute) {
    if (dump_) {  // the rows of the input, after those of a resumed conversation
      const std::size_t skip = feed_.size() - input_.size();
      dump_->write(rows.data() + skip * vocab_, (rows.size() / vocab_ - skip) * vocab_ * sizeof(float));
    }
    fed_ = input_.size();
  } else {
    if (dump_) dump_->write(rows.data(), rows.size() * sizeof(float));
    fed_ += feed_.size();
  }
  if (fed_ < input_.size()) return;
  r.prefill_seconds = seconds_since(t0_);
  if (dump_) dump_->commit();
  prefill = false;
  start_decode(last_pick(picks));
}

void Sequence::Impl::start_decode(std::uint32_t first) {
  // At most one token more than the context still holds can be generated.
  const std::int64_t room = session.max_positions() - session.position() + 1;
  const auto planned = static_cast<std::size_t>(std::max<std::int64_t>(0, std::min(g.max_new_tokens, room)));
  r.generated.reserve(planned);
  r.steps.reserve(planned);
  r.stop_reason = StopReason::length;
  if (g.max_new_tokens <= 0) {
    done = true;
    return;
  }
  ts_ = Clock::now();
  next_ = first;
  if (emit(next_, session.position())) {
    finish(next_, ts_);
    done = true;
  }
}

bool Sequence::Impl::emit(std::uint32_t t, std::int64_t position) {
  r.generated.push_back(t);
  if (on_token) on_token(t);
  const bool is_eos = g.stop_at_eos && (t == g.eos_token || std::find(g.stop_tokens.begin(), g.stop_tokens.end(), t) !=
                                                                g.stop_tokens.end());
  r.interrupted = !is_eos && stop_requested();
  r.stopped_at_eos = is_eos;
  if (is_eos)
    r.stop_reason = StopReason::eos;
  else if (r.interrupted)
    r.stop_reason = StopReason::interrupted;
  else if (static_cast<std::int64_t>(r.generated.size()) >= g.max_new_tokens)
    r.stop_reason = StopReason::length;
  else if (position >= session.max_positions())
    r.stop_reason = StopReason::context_full;
  else
    return false;
  return true;
}

void Sequence::Impl::finish(std::uint32_t last_token, Clock::time_point ts) {
  // The last token: its successor is not needed now, so the conversation keeps it to feed
  // first next time.
  r.steps.push_back({last_token, seconds_since(ts), false});
  session.set_pending({last_token});
}

std::vector<std::uint32_t> Sequence::Impl::draft(std::uint32_t next) {
  if (g.mode != DecodeMode::incremental || g.speculative.max_draft <= 0) return {};
  // Fitted to the tokens still wanted (the last one is never fed) and to the context.
  const std::int64_t wanted = g.max_new_tokens - static_cast<std::int64_t>(r.generated.size()) - 1;
  const std::int64_t room = session.max_positions() - session.position() - 1;
  const std::int64_t allowed = g.speculative.adaptive ? static_cast<std::int64_t>(budget_.next())
                                                      : g.speculative.max_draft;
  const std::int64_t most = std::min({allowed, wanted, room});
  if (most <= 0) return {};
  context_.assign(session.tokens().begin(), session.tokens().end());
  context_.push_back(next);
  const SpeculativeSettings& s = g.speculative;
  const auto n = static_cast<std::size_t>(most);
  // A draft model writes like the model; a context match only where text repeats.
  if (s.model) return s.model->draft(context_, n, g.sampling, s.draft_min_p);
  // A context match of 2 tokens or more, else the corpus, else a shorter context match:
  // a single repeated token predicts worse than a corpus that knows the phrase.
  const auto longest = static_cast<std::size_t>(s.ngram), shortest = static_cast<std::size_t>(s.min_ngram);
  if (!s.store) return lookup_drafts(context_, longest, shortest, n);
  std::vector<std::uint32_t> drafts = lookup_drafts(context_, longest, std::max<std::size_t>(shortest, 2), n);
  if (drafts.empty()) drafts = s.store->draft(context_, n);
  if (drafts.empty() && shortest < 2) drafts = lookup_drafts(context_, 1, shortest, n);
  return drafts;
}

// The next token was fed with its drafts in one pass: pick i is the successor of token i
// exactly as a sequential run would draw it (same logits bits, same (seed, position) draw,
// same ids before it). Every picked token is handed out in order; a draft that differs from
// the pick ends the check and the pick is the next token. keep(): the next token and the
// drafts confirmed.
void Sequence::Impl::verify(std::span<const std::uint32_t> picks) {
  const std::int64_t pos0 = session.position() - static_cast<std::int64_t>(feed_.size());
  if (picks.size() != drafts_ + 1)
    throw RuntimeError("a verification of " + std::to_string(drafts_) + " drafts answered with " +
                       std::to_string(picks.size()) + " picks");
  ++r.speculative.verify_passes;
  r.speculative.drafts_proposed += drafts_;
  keep_ = 1;  // next
  r.steps.push_back({next_, seconds_since(ts_), true});
  for (std::size_t i = 0; i <= drafts_; ++i) {
    ts_ = Clock::now();
    const std::int64_t at = pos0 + 1 + static_cast<std::int64_t>(i);
    const std::uint32_t t = picks[i];
    try {
      ended_ = emit(t, at);
    } catch (...) {
      // As in a sequential run: what came before t was fed, t was not.
      verify_failure_ = std::current_exception();
      return;
    }
    if (ended_) {
      finish_step_ = {t, seconds_since(ts_), false};
      return;
    }
    if (i < drafts_ && t == feed_[i + 1]) {
      ++keep_;
      ++r.speculative.drafts_accepted;
      r.steps.push_back({t, seconds_since(ts_), true});
      continue;
    }
    next_ = t;  // the model's own pick: checked (and fed) next step
    return;
  }
}

void Sequence::Impl::settle() {
  if (!prefill && tentative_) {
    budget_.checked(drafts_, r.speculative.drafts_accepted - accepted_before_);
    if (verify_failure_) {
      failure = verify_failure_;
      done = true;
      return;
    }
    if (ended_) {
      r.steps.push_back(finish_step_);
      session.set_pending({finish_step_.token});
      done = true;
    }
  }
  if (hooks.on_step) hooks.on_step(session);
}

void Sequence::Impl::fail(std::exception_ptr e) {
  done = true;
  try {
    std::rethrow_exception(e);
  } catch (const Interrupted& i) {
    // A storage wait abandoned on the stop request: the forward pass it was in is cut.
    r.interrupted = true;
    r.stop_reason = StopReason::interrupted;
    r.cut = i.what();
    if (r.prefill_seconds == 0) r.prefill_seconds = seconds_since(t0_);
  } catch (...) {
    failure = e;
  }
}

Sequence::Sequence(Session& session, const GenerateSettings& settings, std::function<void(std::uint32_t)> on_token,
                   SequenceHooks hooks)
    : impl_(std::make_unique<Impl>(session, settings, std::move(on_token), std::move(hooks))) {}

Sequence::~Sequence() = default;

bool Sequence::done() const noexcept { return impl_->done; }
bool Sequence::prefilling() const noexcept { return impl_->prefill && !impl_->done; }
const GenerateResult& Sequence::result() const noexcept { return impl_->r; }
GenerateResult& Sequence::result() noexcept { return impl_->r; }
std::exception_ptr Sequence::failure() const noexcept { return impl_->failure; }
Session& Sequence::session() noexcept { return impl_->session; }

}  // namespace k3
