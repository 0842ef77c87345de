// The inside of k3::Sequence (k3/scheduler.hpp): one generation as steps. The scheduler
// asks it for its feed of a step (plan: the pass picks its next ids by its sampling
// settings), hands it the pass's answer (absorb: the picks, and the logits rows of a dump), settles a
// tentative chunk it kept a prefix of (Session::keep_tentative), then lets it finish the
// step (settle). What generate() did in one loop (prefill, sample, emit, verify drafts)
// lives here once, for one sequence alone and for many in a batch.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <k3/batch.hpp>
#include <k3/draft.hpp>
#include <k3/generate.hpp>
#include <k3/scheduler.hpp>

#include "util/atomic_file.hpp"

namespace k3 {

struct Sequence::Impl {
  using Clock = std::chrono::steady_clock;

  Impl(Session& s, const GenerateSettings& g, std::function<void(std::uint32_t)> on_token, SequenceHooks hooks);

  /// This step's feed, or false when it feeds nothing now: its prefill waits for budget
  /// (`prefill_left`, taken from), or it just ended (a stop request before a chunk or a
  /// token; done() then).
  bool plan(std::size_t& prefill_left, BatchFeed& feed);
  /// Its answer of the pass: a pick after each row the pass answered its feed with (all of
  /// the feed's, or its last), and their logits when it asked for them (a dump). A
  /// tentative feed's verification decides keep() here.
  void absorb(std::span<const float> rows, std::span<const std::uint32_t> picks);
  /// Drafts a tentative feed keeps (its next token included).
  [[nodiscard]] std::size_t keep() const noexcept { return keep_; }
  /// After the session settled the step (its tentative chunk kept): ends of generation
  /// decided in absorb, then hooks.on_step.
  void settle();
  /// The pass it was in failed: it ends with `e` (k3::Interrupted: cut, not a failure).
  void fail(std::exception_ptr e);

  Session& session;
  GenerateSettings g;
  std::function<void(std::uint32_t)> on_token;
  SequenceHooks hooks;
  GenerateResult r;
  std::exception_ptr failure;
  bool done = false;
  bool prefill = true;

 private:
  bool stop_requested() const { return g.stop != nullptr && g.stop->load(std::memory_order_relaxed); }
  bool plan_prefill(std::size_t& prefill_left, BatchFeed& feed);
  bool plan_decode(BatchFeed& feed);
  void absorb_prefill(std::span<const float> rows, std::span<const std::uint32_t> picks);
  void start_decode(std::uint32_t first);
  bool emit(std::uint32_t t, std::int64_t position);
  void finish(std::uint32_t last_token, Clock::time_point ts);
  std::vector<std::uint32_t> draft(std::uint32_t next);
  void verify(std::span<const std::uint32_t> picks);
  void end_interrupted_before_feed();

  std::size_t vocab_;
  std::vector<std::uint32_t> input_;  ///< pending ids, then the prompt
  std::size_t fed_ = 0;               ///< of input_
  std::optional<AtomicFile> dump_;
  bool started_ = false;
  Clock::time_point t0_, ts_;
  std::uint32_t next_ = 0;           ///< generated, handed out, not fed yet
  std::vector<std::uint32_t> feed_;  ///< this step's tokens
  std::size_t drafts_ = 0;           ///< drafts in feed_ (after next_)
  bool tentative_ = false;
  std::size_t keep_ = 0;
  bool ended_ = false;                 ///< verification ended generation
  std::exception_ptr verify_failure_;  ///< on_token threw during verification
  std::uint64_t accepted_before_ = 0;
  StepRecord finish_step_;
  std::vector<std::uint32_t> context_;
  DraftBudget budget_;
};

}  // namespace k3
