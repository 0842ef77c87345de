// k3::StepScheduler (k3/scheduler.hpp): each step, one batched forward pass (k3/batch.hpp)
// over every active sequence's next positions: the decoding sequences' tokens and drafts
// first, then prompt chunks within the prefill budget, the oldest prefilling sequence
// first. Then each sequence takes its rows; the sequences done leave.
#include <k3/scheduler.hpp>

#include <algorithm>
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

struct StepScheduler::Impl {
  Impl(Model& m, const SchedulerSettings& s)
      : settings(s), pass(m, step_rows(s), s.context, std::max<std::size_t>(1, s.parallel)),
        vocab(static_cast<std::size_t>(m.config().vocab_size)) {
    const std::size_t n = std::max<std::size_t>(1, s.parallel);
    active.reserve(n);
    feeds.reserve(n);
    members.reserve(n);
    finished.reserve(n);
    logits.reserve(step_rows(s) * vocab);
  }

  /// Each active sequence's feed of this step, decoding ones first.
  void plan() {
    feeds.clear();
    members.clear();
    std::size_t prefill_left = std::max<std::size_t>(1, settings.prefill_budget);
    for (const bool prefilling : {false, true})
      for (Sequence* s : active) {
        Sequence::Impl& q = s->impl();
        if (q.done || q.prefill != prefilling) continue;
        BatchFeed feed;
        try {
          if (!q.plan(prefill_left, feed)) continue;
        } catch (...) {
          q.fail(std::current_exception());  // a draft source or the session refused
          continue;
        }
        feeds.push_back(feed);
        members.push_back(&q);
      }
  }

  /// plan(), the pass, distribute(); last's figures.
  void run_step();

  /// Hands each sequence of the pass its rows and settles its tentative chunk.
  void distribute() {
    std::size_t row = 0;
    for (std::size_t k = 0; k < feeds.size(); ++k) {
      const BatchFeed& f = feeds[k];
      Sequence::Impl& q = *members[k];
      const std::size_t n = f.all_positions || f.tentative ? f.tokens.size() : 1;
      try {
        q.absorb(std::span<const float>(logits).subspan(row * vocab, n * vocab));
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
      row += n;
    }
  }

  SchedulerSettings settings;
  BatchForward pass;
  std::size_t vocab;
  std::vector<Sequence*> active, finished;
  std::vector<BatchFeed> feeds;
  std::vector<Sequence::Impl*> members;  ///< the sequence of each feed
  std::vector<float> logits;
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
    s.run_step();
  } catch (...) {
    // Nothing above lets one sequence's failure out; whatever does ends every sequence of
    // the step, never the scheduler (a server's other requests go on).
    for (Sequence* q : s.active)
      if (!q->done()) q->impl().fail(std::current_exception());
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
  Impl& s = *this;
  s.plan();
  StepStats st;
  st.sequences = s.feeds.size();
  for (std::size_t k = 0; k < s.feeds.size(); ++k) {
    st.rows += s.feeds[k].tokens.size();
    st.decoding += s.members[k]->prefill ? 0 : 1;
  }
  if (!s.feeds.empty()) {
    bool passed = true;
    try {
      s.pass.run(s.feeds, s.logits);
    } catch (...) {
      passed = false;
      for (Sequence::Impl* q : s.members) q->fail(std::current_exception());
    }
    if (passed) s.distribute();
  }
  s.last = st;
}

std::size_t StepScheduler::active() const noexcept { return impl_->active.size(); }
const std::vector<Sequence*>& StepScheduler::finished() const noexcept { return impl_->finished; }
const StepStats& StepScheduler::last() const noexcept { return impl_->last; }
const SchedulerSettings& StepScheduler::settings() const noexcept { return impl_->settings; }

}  // namespace k3
