// The step scheduler (docs/architecture.md, "The step scheduler"): sequences generating
// together. Each step runs one forward pass (k3/batch.hpp) over every active sequence's
// next positions: a decoding sequence's next token and its drafts, a prefilling one's next
// chunk of its prompt within the step's prefill budget. Each sequence then samples, keeps
// the drafts the model confirms and checks its own stop rules, exactly as generate() does
// alone; generate() is this scheduler with one sequence.
//
//   k3::StepScheduler scheduler(model, {.parallel = 4, .prefill_budget = 64, .context = 4096});
//   k3::Sequence a(session_a, settings_a, on_token_a), b(session_b, settings_b);
//   scheduler.add(a);
//   scheduler.add(b);
//   while (scheduler.active() != 0) scheduler.step();   // a.result(), b.result()
//
// Exactness: a sequence's ids, and the logits bits they were drawn from, are the same
// whatever else shares its steps, whenever it joined, and the same as generate() alone
// (each sampler draws by its own (seed, position); drafts change how many tokens a step
// yields, never which).
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include <k3/generate.hpp>
#include <k3/model.hpp>

namespace k3 {

/// What a sequence's owner may ask of it besides generation (the server's prefix reuse).
struct SequenceHooks {
  /// Session positions at which a prefill chunk ends (ascending): the session holds exactly
  /// that many tokens after the step that reaches one, when on_step sees it.
  std::vector<std::int64_t> prefill_marks;
  /// After every step the sequence was fed in, once its session is consistent again (any
  /// tentative chunk settled): the session may be snapshotted here, not in on_token. May be
  /// empty.
  std::function<void(Session&)> on_step;
};

/// One generation on one session, as generate() runs it (k3/generate.hpp): its pending ids
/// and the prompt are fed (in chunks of settings.prefill_chunk at most), then tokens are
/// generated (with drafts, sampled by its own seed, stopped by its own rules and stop flag)
/// until it is done(). The session must outlive it and is fed by nothing else meanwhile.
class Sequence {
 public:
  /// The checks of generate(), at once: UsageError when there is nothing to feed, the prompt
  /// does not fit the context, job.prefill_chunk < 1, or the logits dump cannot be written.
  Sequence(Session& session, const GenerateSettings& settings, std::function<void(std::uint32_t)> on_token = {},
           SequenceHooks hooks = {});
  ~Sequence();
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  /// True once it generated its last token, stopped, or failed.
  [[nodiscard]] bool done() const noexcept;
  /// True while its prompt is still being fed.
  [[nodiscard]] bool prefilling() const noexcept;
  /// What it did; whole once done(). GenerateResult::cut when a storage wait was abandoned.
  [[nodiscard]] const GenerateResult& result() const noexcept;
  [[nodiscard]] GenerateResult& result() noexcept;
  /// What ended it when it failed (on_token threw, the forward pass failed); null otherwise.
  [[nodiscard]] std::exception_ptr failure() const noexcept;
  [[nodiscard]] Session& session() noexcept;

  struct Impl;
  [[nodiscard]] Impl& impl() noexcept { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

struct SchedulerSettings {
  std::size_t parallel = 1;  ///< sequences active at once
  /// Prompt tokens one step feeds in all, shared by the sequences being prefilled (the
  /// oldest first, each at most its prefill_chunk), beside every decoding sequence's next
  /// token and drafts: a long prompt shares steps with the decoding sequences instead of
  /// stalling them.
  std::size_t prefill_budget = 64;
  std::int64_t context = 4096;  ///< positions of the sessions (the run buffers' MLA scores)
  std::size_t max_draft = 0;    ///< drafts per decoding sequence at most (the rows a step holds)
};

/// The rows one step holds at most: every decoding sequence's token and drafts, or all but
/// one of them beside the prefill budget (k3/plan.hpp plans these buffers).
[[nodiscard]] std::size_t step_rows(const SchedulerSettings& settings) noexcept;

/// One step's work (StepScheduler::last()).
struct StepStats {
  std::size_t sequences = 0;  ///< in the pass
  std::size_t decoding = 0;   ///< of those, generating
  std::size_t rows = 0;       ///< tokens fed (prompt chunks, tokens and drafts)
  double seconds = 0;         ///< the step, pass and sampling
  /// Passes in flight when this step's pass was collected, its own included: 1 on a whole
  /// model, up to the ranks on rank 0 of a split one.
  std::size_t in_flight = 0;
};

class StepScheduler {
 public:
  StepScheduler(Model& model, const SchedulerSettings& settings);
  ~StepScheduler();
  StepScheduler(const StepScheduler&) = delete;
  StepScheduler& operator=(const StepScheduler&) = delete;

  /// `sequence` joins at the next step (it must stay alive until it has left). RuntimeError
  /// when `parallel` are already active or it is done.
  void add(Sequence& sequence);
  /// One step: a forward pass over every active sequence's next positions, then each
  /// samples and emits its tokens; the sequences done() leave (finished(): them). False when
  /// no sequence was active. On rank 0 of a model split over ranks the active sequences go
  /// in groups, one pass each, up to one per rank in flight: a step launches the passes of
  /// the sequences not in flight, then collects the oldest pass (its group samples). A
  /// failed pass ends the sequences in it (Sequence::failure; a storage wait abandoned on a
  /// stop request: GenerateResult::cut), not the scheduler.
  bool step();
  /// Active sequences (joined and not done).
  [[nodiscard]] std::size_t active() const noexcept;
  /// The sequences that left in the last step.
  [[nodiscard]] const std::vector<Sequence*>& finished() const noexcept;
  [[nodiscard]] const StepStats& last() const noexcept;
  [[nodiscard]] const SchedulerSettings& settings() const noexcept;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace k3
