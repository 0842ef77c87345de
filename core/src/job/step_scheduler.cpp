// k3::StepScheduler (k3/scheduler.hpp): each step, one batched forward pass (k3/batch.hpp)
// over every active sequence's next positions: the decoding sequences' tokens and drafts
// first, then prompt chunks within the prefill budget, the oldest prefilling sequence
// first. Then each sequence takes its answer (the ids the pass picked by its sampling
// settings; logits rows only for a dump); the sequences done leave.
//
// On rank 0 of a model split over R ranks the active sequences go in groups instead, up to
// R passes in flight at once (docs/cluster.md, "How a pass travels"): a step launches a
// pass for every group it can form from the sequences not in flight, then collects the
// oldest pass and hands its sequences their rows. A sequence is in one pass at a time, so
// it leaves its group only once its pass is back and its tentative chunk settled.
#include <k3/scheduler.hpp>

#include <algorithm>
#include <deque>
#include <string>

#include <k3/batch.hpp>
#include <k3/error.hpp>

#include "job/sequence_impl.hpp"

namespace k3 {

std::size_t step_rows(const SchedulerSettings& s) noexcept {
  const std::size_t n = std::max<std::size_t>(1, s.parallel);
  const std::size_t checked = 1 + s.max_draft;  // a token and its drafts
  const std::size_t budget = std::max<std::size_t>(1, s.prefill_budget);
  return std::max(n * checked, (n - 1) * checked + budget);
}

/// The sequences of one pass and their feeds.
struct PassGroup {
  std::vector<BatchFeed> feeds;
  std::vector<Sequence::Impl*> members;  ///< the sequence of each feed
  std::uint64_t pass = 0;                ///< launched: its number
  StepStats stats;

  void count() {
    stats = {};
    stats.sequences = feeds.size();
    for (std::size_t k = 0; k < feeds.size(); ++k) {
      stats.rows += feeds[k].tokens.size();
      stats.decoding += members[k]->prefill ? 0 : 1;
    }
  }
};

struct StepScheduler::Impl {
  Impl(Model& m, const SchedulerSettings& s)
      : settings(s),
        pass(m, step_rows(s), s.context, std::max<std::size_t>(1, s.parallel)),
        vocab(static_cast<std::size_t>(m.config().vocab_size)),
        stages(pass.stages()) {
    const std::size_t n = std::max<std::size_t>(1, s.parallel);
    active.reserve(n);
    finished.reserve(n);
    busy.reserve(n);
    group.feeds.reserve(n);
    group.members.reserve(n);
    answer.picks.reserve(step_rows(s));
  }

  /// Into `g`, the feeds of this step of at most `most` sequences not in flight, decoding
  /// ones first, within one prefill budget.
  void plan(PassGroup& g, std::size_t most) {
    g.feeds.clear();
    g.members.clear();
    std::size_t prefill_left = std::max<std::size_t>(1, settings.prefill_budget);
    for (const bool prefilling : {false, true})
      for (Sequence* s : active) {
        Sequence::Impl& q = s->impl();
        if (g.feeds.size() >= most) return;
        if (q.done || q.prefill != prefilling || in_flight(q)) continue;
        BatchFeed feed;
        try {
          if (!q.plan(prefill_left, feed)) continue;
        } catch (...) {
          q.fail(std::current_exception());  // a draft source or the session refused
          continue;
        }
        g.feeds.push_back(feed);
        g.members.push_back(&q);
      }
  }

  [[nodiscard]] bool in_flight(const Sequence::Impl& q) const {
    return std::find(busy.begin(), busy.end(), &q) != busy.end();
  }

  /// One pass over every active sequence, waited for (a whole model).
  void run_step();
  /// Rank 0 of a split model: launches groups while fewer than `stages` are in flight,
  /// then collects the oldest.
  void run_pipelined();

  /// Collects every pass in flight, dropping its answer (a step that failed as a whole).
  void abandon() noexcept {
    for (PassGroup& g : flying) {
      try {
        pass.collect(g.pass, answer);
      } catch (...) {
        // the pass is over either way; its sequences fail with the step
      }
    }
    flying.clear();
    busy.clear();
  }

  /// Hands each sequence of `g`'s pass its picks and logits rows and settles its tentative
  /// chunk.
  void distribute(const PassGroup& g) {
    std::size_t row = 0, pick = 0;
    for (std::size_t k = 0; k < g.feeds.size(); ++k) {
      const BatchFeed& f = g.feeds[k];
      Sequence::Impl& q = *g.members[k];
      const std::size_t n = answered_rows(f);
      const std::size_t rows = f.logits ? n : 0, picks = f.pick != nullptr ? n : 0;
      try {
        q.absorb(std::span<const float>(answer.logits).subspan(row * vocab, rows * vocab),
                 std::span<const std::uint32_t>(answer.picks).subspan(pick, picks));
        if (f.tentative) q.session.keep_tentative(q.keep());
        q.settle();
      } catch (...) {
        if (f.tentative && !q.done) {
          try {
            q.session.keep_tentative(0);
          } catch (...) {
            // already settled: the failure below is what counts
          }
        }
        q.fail(std::current_exception());
      }
      row += rows;
      pick += picks;
    }
  }

  SchedulerSettings settings;
  BatchForward pass;
  std::size_t vocab;
  std::size_t stages;  ///< passes kept in flight: the ranks of a split model, else 1
  std::vector<Sequence*> active, finished;
  PassGroup group;                    ///< a whole model's step
  std::deque<PassGroup> flying;       ///< a split model's passes in flight, oldest first
  std::vector<Sequence::Impl*> busy;  ///< the sequences in them
  PassOutput answer;                  ///< of the pass being distributed
  StepStats last;
};

StepScheduler::StepScheduler(Model& model, const SchedulerSettings& settings)
    : impl_(std::make_unique<Impl>(model, settings)) {}

StepScheduler::~StepScheduler() = default;

void StepScheduler::add(Sequence& sequence) {
  Impl& s = *impl_;
  if (sequence.done()) throw RuntimeError("a finished sequence cannot join the scheduler");
  if (s.active.size() >= std::max<std::size_t>(1, s.settings.parallel))
    throw RuntimeError("the scheduler already runs " + std::to_string(s.active.size()) + " sequences (its parallel)");
  if (std::find(s.active.begin(), s.active.end(), &sequence) != s.active.end())
    throw RuntimeError("a sequence joined the scheduler twice");
  s.active.push_back(&sequence);
}

bool StepScheduler::step() {
  Impl& s = *impl_;
  s.finished.clear();
  if (s.active.empty()) return false;
  const auto t0 = std::chrono::steady_clock::now();
  s.last = {};
  try {
    if (s.stages > 1)
      s.run_pipelined();
    else
      s.run_step();
  } catch (...) {
    // Nothing above lets one sequence's failure out; whatever does ends every sequence of
    // the step, never the scheduler (a server's other requests go on). The passes still in
    // flight are taken back first: their sequences may go once they are done.
    const std::exception_ptr e = std::current_exception();
    s.abandon();
    for (Sequence* q : s.active)
      if (!q->done()) q->impl().fail(e);
  }
  for (auto it = s.active.begin(); it != s.active.end();) {
    if ((*it)->done()) {
      s.finished.push_back(*it);
      it = s.active.erase(it);
    } else {
      ++it;
    }
  }
  s.last.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return true;
}

void StepScheduler::Impl::run_step() {
  plan(group, active.size());
  group.count();
  if (!group.feeds.empty()) {
    bool passed = true;
    try {
      pass.run(group.feeds, answer);
    } catch (...) {
      passed = false;
      for (Sequence::Impl* q : group.members) q->fail(std::current_exception());
    }
    if (passed) distribute(group);
  }
  last = group.stats;
  last.in_flight = group.feeds.empty() ? 0 : 1;
}

void StepScheduler::Impl::run_pipelined() {
  while (flying.size() < stages) {
    std::size_t idle = 0;
    for (Sequence* s : active) idle += !s->impl().done && !in_flight(s->impl()) ? 1 : 0;
    if (idle == 0) break;
    // The sequences not in flight, spread over the passes still free.
    const std::size_t slots = stages - flying.size();
    PassGroup& g = flying.emplace_back();
    plan(g, (idle + slots - 1) / slots);
    if (g.feeds.empty()) {
      flying.pop_back();
      break;
    }
    g.count();
    try {
      g.pass = pass.launch(g.feeds);
    } catch (...) {
      for (Sequence::Impl* q : g.members) q->fail(std::current_exception());
      flying.pop_back();
      continue;
    }
    busy.insert(busy.end(), g.members.begin(), g.members.end());
  }
  last = {};
  if (flying.empty()) return;
  const std::size_t in_flight_now = flying.size();
  PassGroup g = std::move(flying.front());
  flying.pop_front();
  std::erase_if(busy, [&](const Sequence::Impl* q) {
    return std::find(g.members.begin(), g.members.end(), q) != g.members.end();
  });
  bool passed = true;
  try {
    pass.collect(g.pass, answer);
  } catch (...) {
    passed = false;
    for (Sequence::Impl* q : g.members) q->fail(std::current_exception());
  }
  if (passed) distribute(g);
  last = g.stats;
  last.in_flight = in_flight_now;
}

std::size_t StepScheduler::active() const noexcept { return impl_->active.size(); }
const std::vector<Sequence*>& StepScheduler::finished() const noexcept { return impl_->finished; }
const StepStats& StepScheduler::last() const noexcept { return impl_->last; }
const SchedulerSettings& StepScheduler::settings() const noexcept { return impl_->settings; }

}  // namespace k3
