#include <k3/generate.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <optional>

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
  std::vector<float> logits, last;
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

  // Prefill: the input in chunks (or all at once in recompute mode).
  const auto t0 = std::chrono::steady_clock::now();
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
        r.prefill_seconds = seconds_since(t0);
        return r;
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

  const std::size_t V = last.size();
  Sampler sampler(V);
  // At most one token more than the context still holds can be generated.
  const std::int64_t room = session.max_positions() - session.position() + 1;
  r.generated.reserve(static_cast<std::size_t>(std::max<std::int64_t>(0, std::min(g.max_new_tokens, room))));
  r.steps.reserve(r.generated.capacity());
  for (std::int64_t step = 0; step < g.max_new_tokens; ++step) {
    const auto ts = std::chrono::steady_clock::now();
    const std::uint32_t next = sampler.sample(last.data(), g.sampling, session.position());
    r.generated.push_back(next);
    if (on_token) on_token(next);
    const bool is_eos = g.stop_at_eos && (next == g.eos_token || std::find(g.stop_tokens.begin(), g.stop_tokens.end(),
                                                                           next) != g.stop_tokens.end());
    r.interrupted = !is_eos && stop_requested(g);
    if (is_eos || r.interrupted || step + 1 == g.max_new_tokens) {
      r.steps.push_back({next, seconds_since(ts), false});
      r.stopped_at_eos = is_eos;
      // Its successor is not needed now: the conversation keeps it to feed first next time.
      session.set_pending({next});
      break;
    }
    if (g.mode == DecodeMode::recompute) {
      std::vector<std::uint32_t> all = session.tokens();
      all.push_back(next);
      session.reset();
      session.feed(all, false, logits);
    } else {
      session.feed({&next, 1}, false, logits);
    }
    last = logits;
    r.steps.push_back({next, seconds_since(ts), true});
  }
  return r;
}

}  // namespace k3
