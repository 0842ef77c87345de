// The server's engine (engine.hpp): sequence slots, prefix reuse, and the scheduler's thread.
#include "serve/engine.hpp"

#include <algorithm>

#include <k3/error.hpp>
#include <k3/log.hpp>
#include <k3/units.hpp>

#include "serve/latency_metrics.hpp"

namespace k3::serve {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

bool is_prefix(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b) {
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

/// What a snapshot of `s` holds at its full context: the fixed KDA part (an empty
/// session's snapshot) plus the MLA latent cache and token of every position.
std::size_t full_snapshot_bytes(const Session& s, const ModelConfig& c) {
  std::size_t per_token = sizeof(std::uint32_t);
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i)
    if (c.is_mla(i)) per_token += static_cast<std::size_t>(c.kv_lora_rank + c.qk_rope_head_dim) * sizeof(float);
  return s.snapshot().bytes() + per_token * static_cast<std::size_t>(s.max_positions());
}

/// Readies a slot's session for a request that reuses `start` tokens: restored from a stored
/// snapshot, kept as it is (a live prefix), or emptied. Apart from Engine::run: one step.
void resume_session(Session& session, const SessionSnapshot& restore_from, std::size_t start) {
  if (!restore_from.empty())
    session.restore(restore_from);
  else if (start == 0 && session.position() > 0)
    session.reset();
  // The request's ids say what comes next: the id generate() left pending (the last one it
  // generated, or the rest of a stopped prefill) is in them or was not part of this turn.
  session.set_pending({});
}

/// The server's settings for one request: its prompt past the reused `start` tokens, its
/// sampling, stops and token limit. Apart from Engine::run: a list of fields.
GenerateSettings request_settings(const GenerateSettings& defaults, const RunRequest& req, std::size_t start,
                                  std::int64_t context, std::atomic<bool>& stop) {
  const std::vector<std::uint32_t>& ids = req.ids;
  GenerateSettings g = defaults;
  g.prompt.assign(ids.begin() + static_cast<std::ptrdiff_t>(start), ids.end());
  g.mode = DecodeMode::incremental;
  // At most one token more than the context holds can be generated.
  g.max_new_tokens = std::min<std::int64_t>(req.max_tokens, context - static_cast<std::int64_t>(ids.size()) + 1);
  g.sampling = req.sampling;
  g.stop_at_eos = true;
  g.stop_tokens = req.stop_ids;
  g.stop = &stop;
  g.dump_logits.clear();
  return g;
}

/// The prompt positions Engine::run snapshots at (see there): every multiple of `every`
/// past `start`, and `max_len` (before the last prompt token).
std::vector<std::int64_t> prefill_snapshot_marks(std::size_t start, std::size_t max_len, std::size_t every) {
  std::vector<std::int64_t> marks;
  for (std::size_t m = (start / every + 1) * every; m < max_len; m += every)
    marks.push_back(static_cast<std::int64_t>(m));
  if (max_len > start) marks.push_back(static_cast<std::int64_t>(max_len));
  return marks;
}

}  // namespace

Engine::Engine(std::unique_ptr<Runtime> runtime, const GenerateSettings& defaults, const ServeOptions& options,
               LatencyMetrics* latency)
    : runtime_(std::move(runtime)),
      latency_(latency),
      chat_(runtime_->tokenizer()),
      defaults_(defaults),
      options_(options),
      context_(runtime_->settings().memory.context),
      store_(0) {
  Model& model = runtime_->model();
  const MemoryPlan& plan = model.plan();
  const std::size_t n = std::max<std::size_t>(1, plan.parallel);
  slots_.resize(n);
  for (Slot& s : slots_) s.session = std::make_unique<Session>(model, context_);
  const std::size_t full = full_snapshot_bytes(*slots_.front().session, model.config());
  store_ = PrefixStore<SessionSnapshot>(options.reuse ? options.snapshot_budget_bytes.value_or(full * 4) : 0);
  if (options.reuse)
    log(LogLevel::info, "serve",
        "prefix reuse: snapshots within " + format_bytes(store_.budget()) + " (a full-context snapshot is " +
            format_bytes(full) + ")");
  SchedulerSettings ss;
  ss.parallel = n;
  ss.prefill_budget = static_cast<std::size_t>(plan.prefill_budget);
  ss.context = context_;
  ss.max_draft = static_cast<std::size_t>(std::max<std::int64_t>(0, defaults_.speculative.max_draft));
  scheduler_ = std::make_unique<StepScheduler>(model, ss);
  stats_.parallel = n;
  stats_.steps.by_size.assign(n + 1, 0);
  running_.reserve(n);
  log(LogLevel::info, "serve",
      std::to_string(n) + " sequence" + (n == 1 ? "" : "s") + " decoded together (serve.parallel" +
          (plan.parallel_auto ? " auto" : "") + "), " + std::to_string(ss.prefill_budget) +
          " prompt tokens per step (serve.prefill_budget)");
  thread_ = std::thread([this] { schedule(); });
}

Engine::~Engine() {
  stop();
  if (thread_.joinable()) thread_.join();
}

void Engine::stop() {
  {
    std::lock_guard lock(m_);
    stopping_ = true;
  }
  wake_.notify_all();
}

EngineStats Engine::stats() const {
  std::lock_guard lock(m_);
  EngineStats s = stats_;
  s.snapshot_bytes = store_.bytes();
  s.snapshots = store_.size();
  s.evictions = store_.evictions();
  return s;
}

void Engine::keep(const Session& session) {
  if (!options_.reuse || session.position() == 0) return;
  SessionSnapshot snap = session.snapshot();  // the copy, outside the lock
  std::lock_guard lock(m_);
  store_.put(std::move(snap));
}

// Under m_. The slot whose session holds the longest prefix of `ids` (a conversation
// continued where it ended), unless a stored snapshot holds a longer one; otherwise the
// slot used least recently, so that recent conversations stay.
std::size_t Engine::take_slot(const std::vector<std::uint32_t>& ids, std::size_t max_len, std::size_t& start,
                              SessionSnapshot& restore_from) {
  std::size_t live = slots_.size(), live_len = 0, oldest = slots_.size();
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].busy) continue;
    if (oldest == slots_.size() || slots_[i].used < slots_[oldest].used) oldest = i;
    const auto& have = slots_[i].session->tokens();
    if (options_.reuse && !have.empty() && have.size() <= max_len && have.size() > live_len && is_prefix(have, ids)) {
      live = i;
      live_len = have.size();
    }
  }
  if (oldest == slots_.size()) throw RuntimeError("no free sequence slot (more requests running than serve.parallel)");
  start = 0;
  std::size_t slot = oldest;
  if (options_.reuse) {
    const SessionSnapshot* snap = store_.longest_prefix(ids, max_len);
    if (snap != nullptr && snap->tokens().size() > live_len) {
      restore_from = *snap;
      start = snap->tokens().size();
      ++stats_.snapshot_hits;
    } else if (live_len > 0) {
      slot = live;
      start = live_len;
      ++stats_.live_hits;
    } else {
      ++stats_.misses;
    }
  }
  slots_[slot].busy = true;
  return slot;
}

RunResult Engine::run(const RunRequest& req) {
  const auto t0 = Clock::now();
  RunResult r;
  const std::vector<std::uint32_t>& ids = req.ids;
  if (ids.empty()) throw UsageError("an empty prompt");
  std::atomic<bool>& stop = *req.stop;
  auto check_deadline = [&] {
    if (Clock::now() >= req.deadline) {
      r.timed_out = true;
      stop.store(true);
    }
  };

  // Where to start: at least the last prompt token is fed, for its logits.
  const std::size_t max_len = ids.size() - 1;
  std::size_t start = 0;
  SessionSnapshot restore_from;
  std::size_t slot_index = 0;
  {
    std::lock_guard lock(m_);
    slot_index = take_slot(ids, max_len, start, restore_from);
  }
  // The slot is this request's until it returns (its session is touched by this thread,
  // then by the scheduler's, never by both at once).
  struct Release {
    Engine& e;
    std::size_t i;
    ~Release() {
      std::lock_guard lock(e.m_);
      e.slots_[i].busy = false;
      e.slots_[i].used = ++e.uses_;
    }
  } release{*this, slot_index};
  Session& session = *slots_[slot_index].session;
  resume_session(session, restore_from, start);
  r.cached = static_cast<std::int64_t>(start);
  GenerateSettings g = request_settings(defaults_, req, start, context_, stop);

  // Snapshots: at every multiple of snapshot_interval of the prompt and before its last
  // token (the same prompt sent again, a retry, resumes there), at the end of the prompt
  // (what the next turn of this conversation starts from even when the reply re-renders to
  // other ids than were generated), every snapshot_interval tokens of the reply, and at its
  // end. Taken after a step, when the session is whole again.
  const auto every = static_cast<std::size_t>(std::max<std::int64_t>(1, options_.snapshot_interval));
  const std::vector<std::int64_t> marks = prefill_snapshot_marks(start, max_len, every);
  SequenceHooks hooks;
  hooks.prefill_marks = marks;
  bool have_first = false, kept_first = false;
  std::size_t next_keep = 0;
  Clock::time_point first{}, last_token{};
  hooks.on_step = [&](Session& s) {
    const auto pos = static_cast<std::size_t>(s.position());
    if (!have_first) {
      if (std::binary_search(marks.begin(), marks.end(), s.position())) keep(s);
    } else if (!kept_first || pos >= next_keep) {
      kept_first = true;
      next_keep = (pos / every + 1) * every;
      keep(s);
    }
    check_deadline();
  };
  auto on_token = [&](std::uint32_t id) {
    const auto now = Clock::now();
    if (!have_first) {
      have_first = true;
      first = now;
      r.first_token_seconds = seconds_since(t0);
    } else {
      r.token_gaps.push_back(std::chrono::duration<double>(now - last_token).count());
    }
    last_token = now;
    if (req.on_token) req.on_token(id);
    check_deadline();
  };
  Sequence sequence(session, g, on_token, std::move(hooks));
  run_on_scheduler(sequence);
  const GenerateResult& gr = sequence.result();
  if (sequence.failure() || !gr.cut.empty()) {
    // The session holds part of a forward pass: nothing of it may be reused.
    session.reset();
    if (sequence.failure()) std::rethrow_exception(sequence.failure());
  }
  r.prefill_seconds = have_first ? r.first_token_seconds : seconds_since(t0);
  r.decode_seconds = have_first ? seconds_since(first) : 0;
  r.generated = gr.generated;
  r.stopped_at_eos = gr.stopped_at_eos;
  r.interrupted = r.interrupted || gr.interrupted;
  if (!gr.cut.empty())
    session.reset();  // part of a forward pass (a storage wait cut short): nothing to resume from
  else
    keep(session);  // the end of the reply: a follow-up whose ids repeat it resumes here
  if (latency_ != nullptr) latency_->observe_request(r);
  return r;
}

// Hands `sequence` to the scheduler's thread and waits until it has ended. Apart from
// Engine::run: the one place a request thread meets the scheduler.
void Engine::run_on_scheduler(Sequence& sequence) {
  Waiting waiting{&sequence, false};
  {
    std::lock_guard lock(m_);
    if (stopping_) throw RuntimeError("the server is stopping");
    inbox_.push_back(&waiting);
  }
  wake_.notify_all();
  {
    std::unique_lock lock(m_);
    finished_.wait(lock, [&] { return waiting.done; });
  }
}

// The scheduler's thread: admits the requests that arrived, runs a step, tells the
// finished ones. Sleeps while nothing runs.
void Engine::schedule() {
  for (;;) {
    {
      std::unique_lock lock(m_);
      wake_.wait(lock, [&] { return stopping_ || !inbox_.empty() || !running_.empty(); });
      if (stopping_ && inbox_.empty() && running_.empty()) return;
      while (!inbox_.empty() && running_.size() < slots_.size()) {
        Waiting* w = inbox_.front();
        inbox_.pop_front();
        scheduler_->add(*w->sequence);
        running_.push_back(w);
      }
      stats_.active = running_.size();
    }
    scheduler_->step();  // a failure ends the sequences it concerns, not the step
    {
      std::lock_guard lock(m_);
      const StepStats& st = scheduler_->last();
      if (st.sequences != 0) {
        ++stats_.steps.steps;
        stats_.steps.sequences += st.sequences;
        stats_.steps.rows += st.rows;
        ++stats_.steps.by_size[std::min(st.sequences, stats_.steps.by_size.size() - 1)];
      }
      for (auto it = running_.begin(); it != running_.end();) {
        if ((*it)->sequence->done()) {
          (*it)->done = true;
          it = running_.erase(it);
        } else {
          ++it;
        }
      }
      stats_.active = running_.size();
    }
    finished_.notify_all();
  }
}

}  // namespace k3::serve
