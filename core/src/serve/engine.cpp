#include "serve/engine.hpp"

#include <algorithm>

#include <k3/error.hpp>
#include <k3/log.hpp>
#include <k3/units.hpp>

namespace k3::serve {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

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

}  // namespace

Engine::Engine(std::unique_ptr<Runtime> runtime, const GenerateSettings& defaults, const ServeOptions& options)
    : runtime_(std::move(runtime)),
      chat_(runtime_->tokenizer()),
      defaults_(defaults),
      options_(options),
      live_(runtime_->model(), runtime_->settings().memory.context),
      store_(options.reuse ? options.snapshot_budget_bytes.value_or(full_snapshot_bytes(live_, runtime_->model().config()) * 4) : 0) {
  if (options.reuse)
    log(LogLevel::info, "serve",
        "prefix reuse: snapshots within " + format_bytes(store_.budget()) + " (a full-context snapshot is " +
            format_bytes(full_snapshot_bytes(live_, runtime_->model().config())) + ")");
}

EngineStats Engine::stats() const {
  EngineStats s = stats_;
  s.snapshot_bytes = store_.bytes();
  s.snapshots = store_.size();
  s.evictions = store_.evictions();
  return s;
}

void Engine::keep(const Session& session) {
  if (!options_.reuse || session.position() == 0) return;
  store_.put(session.snapshot());
}

RunResult Engine::run(const RunRequest& req) {
  const auto t0 = std::chrono::steady_clock::now();
  RunResult r;
  const std::vector<std::uint32_t>& ids = req.ids;
  if (ids.empty()) throw UsageError("an empty prompt");
  std::atomic<bool>& stop = *req.stop;
  auto check_deadline = [&] {
    if (std::chrono::steady_clock::now() >= req.deadline) {
      r.timed_out = true;
      stop.store(true);
    }
  };

  // Where to start: at least the last prompt token is fed, for its logits.
  const std::size_t max_len = ids.size() - 1;
  std::size_t start = 0;
  if (options_.reuse) {
    const auto& have = live_.tokens();
    const std::size_t live_len = is_prefix(have, ids) && have.size() <= max_len ? have.size() : 0;
    const SessionSnapshot* snap = store_.longest_prefix(ids, max_len);
    if (snap != nullptr && snap->tokens().size() > live_len) {
      live_.restore(*snap);
      start = snap->tokens().size();
      ++stats_.snapshot_hits;
    } else if (live_len > 0) {
      start = live_len;
      ++stats_.live_hits;
    } else {
      ++stats_.misses;
    }
  }
  if (start == 0 && live_.position() > 0) live_.reset();
  // The request's ids say what comes next: the id generate() left pending (the last one it
  // generated, or the rest of a stopped prefill) is in them or was not part of this turn.
  live_.set_pending({});
  r.cached = static_cast<std::int64_t>(start);

  // Prefill all but the last prompt token here, in the pipeline's chunks, keeping a
  // snapshot at every multiple of snapshot_interval; generate() feeds the last one.
  const std::size_t chunk = static_cast<std::size_t>(std::max<std::int64_t>(1, defaults_.prefill_chunk));
  const std::size_t every = static_cast<std::size_t>(std::max<std::int64_t>(1, options_.snapshot_interval));
  std::vector<float> logits;
  for (std::size_t at = start; at < max_len;) {
    check_deadline();
    if (stop.load()) {
      r.interrupted = true;
      r.prefill_seconds = seconds_since(t0);
      return r;
    }
    const std::size_t next_mark = (at / every + 1) * every;
    const std::size_t end = std::min({at + chunk, max_len, next_mark});
    try {
      live_.feed({ids.data() + at, end - at}, false, logits);
    } catch (const Interrupted&) {
      // A storage wait cut short on shutdown (HostServices::stop_requested): the session holds
      // part of a forward pass, so it is not kept.
      live_.reset();
      r.interrupted = true;
      r.prefill_seconds = seconds_since(t0);
      return r;
    }
    at = end;
    // At every mark, and before the last prompt token: the same prompt sent again (a retry,
    // a regenerated answer) resumes there.
    if (at == next_mark || at == max_len) keep(live_);
  }

  GenerateSettings g = defaults_;
  g.prompt.assign(ids.end() - 1, ids.end());
  g.mode = DecodeMode::incremental;
  // At most one token more than the context holds can be generated.
  g.max_new_tokens = std::min<std::int64_t>(req.max_tokens, live_.max_positions() - static_cast<std::int64_t>(ids.size()) + 1);
  g.sampling = req.sampling;
  g.stop_at_eos = true;
  g.stop_tokens = req.stop_ids;
  g.stop = &stop;
  g.dump_logits.clear();
  std::chrono::steady_clock::time_point first{};
  bool have_first = false;
  const GenerateResult gr = generate(live_, g, [&](std::uint32_t id) {
    if (!have_first) {
      // The state at the end of the prompt: what the next turn of this conversation starts
      // from even when the reply re-renders to other ids than were generated.
      have_first = true;
      first = std::chrono::steady_clock::now();
      r.first_token_seconds = seconds_since(t0);
      keep(live_);
    } else if (static_cast<std::size_t>(live_.position()) % every == 0) {
      keep(live_);
    }
    if (req.on_token) req.on_token(id);
    check_deadline();
  });
  if (!have_first) r.prefill_seconds = seconds_since(t0);
  else r.prefill_seconds = r.first_token_seconds;
  r.decode_seconds = have_first ? seconds_since(first) : 0;
  r.generated = gr.generated;
  r.stopped_at_eos = gr.stopped_at_eos;
  r.interrupted = r.interrupted || gr.interrupted;
  if (!gr.cut.empty()) {
    live_.reset();  // part of a forward pass (a storage wait cut short): nothing to resume from
    return r;
  }
  keep(live_);  // the end of the reply: a follow-up whose ids repeat it resumes here
  return r;
}

}  // namespace k3::serve
