// generate(): one sequence through the step scheduler (the steps themselves:
// job/sequence.cpp), and what a run reports of it.
#include <k3/generate.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <exception>

#include <k3/error.hpp>
#include <k3/scheduler.hpp>

namespace k3 {

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
                   " exceed memory.context " + std::to_string(session.max_positions()) + " (raise it: -c/--context N)");
}

GenerateResult generate(Session& session, const GenerateSettings& g,
                        const std::function<void(std::uint32_t)>& on_token) {
  // One sequence through the step scheduler: the same steps, and the same forward pass, as
  // many sequences in a batch (k3/scheduler.hpp).
  Sequence sequence(session, g, on_token);
  SchedulerSettings s;
  s.parallel = 1;
  s.prefill_budget = static_cast<std::size_t>(g.prefill_chunk);
  s.context = session.max_positions();
  s.max_draft = g.mode == DecodeMode::incremental
                    ? static_cast<std::size_t>(std::max<std::int64_t>(0, g.speculative.max_draft))
                    : 0;
  StepScheduler scheduler(session.model(), s);
  scheduler.add(sequence);
  while (scheduler.step()) {
  }
  if (sequence.failure()) std::rethrow_exception(sequence.failure());
  return std::move(sequence.result());
}

}  // namespace k3
