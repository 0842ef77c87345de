// k3::BatchForward (k3/batch.hpp): several sessions' states in one pass of the maths
// (maths/pass.hpp), with run buffers of its own for all of them.
#include <k3/batch.hpp>

#include <algorithm>
#include <deque>
#include <string>
#include <utility>

#include <k3/error.hpp>

#include "engine/live_session.hpp"
#include "engine/model_impl.hpp"
#include "maths/pass.hpp"

namespace k3 {

struct BatchForward::Impl {
  Impl(Model& m, std::int64_t p, maths::RunBuffers b)
      : model(m), positions(p), buffers(std::move(b)), sampler(static_cast<std::size_t>(m.config().vocab_size)) {}

  Model& model;
  std::int64_t positions;
  maths::RunBuffers buffers;
  std::vector<maths::SeqSlice> slices;
  std::vector<std::uint32_t> tokens;        ///< every row's id, slices in order
  std::vector<RoutingListener*> listeners;  ///< per slice
  std::vector<std::int64_t> pos0;           ///< per slice: its position before the pass
  SliceListeners observer;
  std::vector<float> activations;   ///< rank 0 of a split model: what goes to the next rank
  std::vector<LinkedSlice> linked;  ///< and each sequence's part of it
  std::vector<float> answered;      ///< a whole model: every answered row, when not all are asked for
  Sampler sampler;
  /// Rank 0: a pass launched and not collected, with its tentative feeds (session,
  /// position before the pass), which keep nothing if it fails.
  struct Launched {
    std::uint64_t pass = 0;
    std::vector<std::pair<Session*, std::int64_t>> tentative;
  };
  std::deque<Launched> launched;  ///< oldest first

  [[nodiscard]] PassLink& link() const {
    PassLink* l = model.impl().link;
    const MemoryPlan& plan = model.plan();
    if (plan.first_layer != 0 || plan.holds_head() || l == nullptr)
      throw RuntimeError("a model holding layers " + std::to_string(plan.first_layer) + "-" +
                         std::to_string(plan.last_layer - 1) + " launches no pass through other ranks");
    return *l;
  }
};

BatchForward::BatchForward(Model& model, std::size_t rows, std::int64_t positions, std::size_t sequences) {
  if (rows == 0 || positions < 1 || sequences == 0)
    throw UsageError("a batched pass needs room for at least one token of one sequence");
  impl_ = std::make_unique<Impl>(model, positions,
                                 maths::RunBuffers(run_buffer_sizes(model.config(), static_cast<std::int64_t>(rows),
                                                                    positions, model.threads())));
  impl_->slices.reserve(sequences);
  impl_->tokens.reserve(rows);
  impl_->listeners.reserve(sequences);
  impl_->pos0.reserve(sequences);
  impl_->linked.reserve(sequences);
}

BatchForward::~BatchForward() = default;

std::size_t BatchForward::rows() const noexcept { return impl_->buffers.sizes().chunk; }

void BatchForward::run(std::span<const BatchFeed> feeds, PassOutput& out) {
  Impl& b = *impl_;
  const MemoryPlan& plan = b.model.plan();
  PassLink* link = b.model.impl().link;
  std::size_t banked = 0;
  if (plan.first_layer == 0 && plan.holds_head()) {
    // Straight into the output when every answered row is asked for (no copy).
    const bool every = std::all_of(feeds.begin(), feeds.end(), [](const BatchFeed& f) { return f.logits; });
    std::vector<float>& rows = every ? out.logits : b.answered;
    run_stage(feeds, {}, 0, rows, banked);
    answer(feeds, rows, out);
    return;
  }
  if (plan.first_layer != 0 || link == nullptr)
    throw RuntimeError("a model holding layers " + std::to_string(plan.first_layer) + "-" +
                       std::to_string(plan.last_layer - 1) + " runs a pass as a stage of a pipeline of ranks");
  // Rank 0 of a model split over ranks: its layers here, the others through the link.
  collect(launch(feeds), out);
}

void BatchForward::answer(std::span<const BatchFeed> feeds, std::span<const float> logits, PassOutput& out) {
  Impl& b = *impl_;
  const auto V = static_cast<std::size_t>(b.model.config().vocab_size);
  if (feeds.size() != b.pos0.size())
    throw RuntimeError("a pass answered for " + std::to_string(feeds.size()) + " feeds, run over " +
                       std::to_string(b.pos0.size()));
  std::size_t total = 0, picks = 0, kept = 0;
  for (const BatchFeed& f : feeds) {
    total += answered_rows(f);
    picks += f.pick != nullptr ? answered_rows(f) : 0;
    kept += f.logits ? answered_rows(f) : 0;
  }
  if (logits.size() != total * V)
    throw RuntimeError("a pass answered with " + std::to_string(logits.size() / V) + " logits rows, its feeds have " +
                       std::to_string(total));
  out.picks.clear();
  out.picks.reserve(picks);
  // `logits` is out.logits itself only when every feed keeps its rows (run()): then
  // nothing moves below.
  std::size_t row = 0;
  for (std::size_t i = 0; i < feeds.size(); ++i) {
    const BatchFeed& f = feeds[i];
    const std::size_t n = answered_rows(f);
    if (f.pick != nullptr) {
      const std::vector<std::uint32_t>& ids = f.session->tokens();
      for (std::size_t r = 0; r < n; ++r) {
        // Row r answers token j; the pick is the id at the position after it, drawn on
        // every id up to and including token j.
        const std::size_t j = f.tokens.size() - n + r;
        const auto after = static_cast<std::size_t>(b.pos0[i]) + j + 1;
        if (after > ids.size())
          throw RuntimeError("a session at position " + std::to_string(after) + " holds " + std::to_string(ids.size()) +
                             " ids");
        out.picks.push_back(b.sampler.sample(logits.data() + (row + r) * V, *f.pick, static_cast<std::int64_t>(after),
                                             std::span<const std::uint32_t>(ids).first(after)));
      }
    }
    row += n;
  }
  if (logits.data() == out.logits.data() && kept == total) return;
  out.logits.resize(kept * V);
  row = 0;
  std::size_t to = 0;
  for (const BatchFeed& f : feeds) {
    const std::size_t n = answered_rows(f);
    if (f.logits) {
      std::copy(logits.begin() + static_cast<std::ptrdiff_t>(row * V),
                logits.begin() + static_cast<std::ptrdiff_t>((row + n) * V),
                out.logits.begin() + static_cast<std::ptrdiff_t>(to * V));
      to += n;
    }
    row += n;
  }
}

std::size_t BatchForward::stages() const noexcept {
  const PassLink* l = impl_->model.impl().link;
  return l != nullptr && impl_->model.plan().first_layer == 0 ? std::max<std::size_t>(1, l->stages()) : 1;
}

std::uint64_t BatchForward::launch(std::span<const BatchFeed> feeds) {
  Impl& b = *impl_;
  PassLink& link = b.link();
  std::size_t banked = 0;
  run_stage(feeds, {}, 0, b.activations, banked);
  Impl::Launched& l = b.launched.emplace_back();
  try {
    b.linked.clear();
    for (std::size_t i = 0; i < feeds.size(); ++i) {
      const BatchFeed& f = feeds[i];
      b.linked.push_back({reinterpret_cast<std::uintptr_t>(f.session), b.pos0[i],
                          static_cast<std::uint32_t>(f.tokens.size()), f.all_positions, f.tentative, f.logits,
                          f.pick != nullptr, f.pick != nullptr ? *f.pick : SamplingSettings{}});
      if (feeds[i].tentative) l.tentative.emplace_back(feeds[i].session, b.pos0[i]);
    }
    l.pass = link.start(b.linked, b.tokens, b.activations, banked);
  } catch (...) {
    b.launched.pop_back();
    for (std::size_t i = 0; i < feeds.size(); ++i)
      if (feeds[i].tentative) engine::keep_tentative(feeds[i].session->impl(), b.pos0[i], 0);
    throw;
  }
  return l.pass;
}

void BatchForward::collect(std::uint64_t pass, PassOutput& out) {
  Impl& b = *impl_;
  PassLink& link = b.link();
  if (b.launched.empty() || b.launched.front().pass != pass)
    throw RuntimeError("pass " + std::to_string(pass) + " is not the oldest launched");
  const Impl::Launched l = std::move(b.launched.front());
  b.launched.pop_front();
  try {
    link.finish(pass, out);
  } catch (...) {
    for (const auto& [session, pos0] : l.tentative) engine::keep_tentative(session->impl(), pos0, 0);
    throw;
  }
}

void BatchForward::run_stage(std::span<const BatchFeed> feeds, std::span<const float> in, std::size_t in_banked,
                             std::vector<float>& out, std::size_t& out_banked) {
  Impl& b = *impl_;
  const ModelConfig& c = b.model.config();
  const MemoryPlan& plan = b.model.plan();
  b.slices.clear();
  b.tokens.clear();
  b.listeners.clear();
  b.pos0.clear();
  if (feeds.empty()) throw RuntimeError("a batched pass with no sequence");
  bool listening = false;
  std::size_t rows = 0;
  for (const BatchFeed& f : feeds) {
    if (f.session == nullptr) throw RuntimeError("a batched pass with no session");
    Session::Impl& s = f.session->impl();
    if (&s.model != &b.model) throw RuntimeError("a batched pass over a session of another model");
    if (s.max_positions > b.positions)
      throw RuntimeError("a batched pass over a session of " + std::to_string(s.max_positions) +
                         " positions, more than its buffers' " + std::to_string(b.positions));
    engine::check_feed(s, f.tokens);
    b.slices.push_back(
        {&s.state, rows, f.tokens.size(), f.all_positions || f.tentative, f.tentative ? &s.tentative : nullptr});
    b.tokens.insert(b.tokens.end(), f.tokens.begin(), f.tokens.end());
    b.listeners.push_back(s.listener);
    b.pos0.push_back(s.state.position);
    listening = listening || s.listener != nullptr;
    rows += f.tokens.size();
  }
  // Only a caller that feeds more than the plan's rows at once (recompute mode, a whole
  // prompt) grows them: at least doubled, so that growing passes reallocate rarely.
  if (rows > b.buffers.sizes().chunk) {
    const auto grown = std::max<std::uint64_t>(rows, 2 * b.buffers.sizes().chunk);
    b.buffers =
        maths::RunBuffers(run_buffer_sizes(c, static_cast<std::int64_t>(grown), b.positions, b.model.threads()));
  }
  b.observer.set(b.listeners);
  b.observer.set_rows(b.slices);
  Model::Impl& m = b.model.impl();
  maths::ForwardContext ctx{c,        *m.ops, m.weight_source(), m.expert_source(), listening ? &b.observer : nullptr,
                            b.buffers};
  for (std::size_t i = 0; i < feeds.size(); ++i)
    if (feeds[i].tentative) feeds[i].session->impl().open_tentative = b.pos0[i];
  try {
    maths::Activations act = plan.first_layer == 0
                                 ? maths::begin_pass(ctx, b.slices, b.tokens)
                                 : maths::resume_pass(ctx, b.slices, b.tokens, plan.first_layer, in, in_banked);
    maths::run_layers(ctx, plan.first_layer, plan.last_layer, b.slices, act);
    if (plan.holds_head()) {
      out.resize(maths::logit_rows(b.slices) * static_cast<std::size_t>(c.vocab_size));
      maths::end_pass(ctx, b.slices, act, out.data());
      out_banked = 0;
    } else {  // the next rank's input: P, then the snapshots taken so far
      const std::size_t n = act.prefix.size();
      out.resize((1 + act.banked) * n);
      std::copy_n(act.prefix.data(), n, out.data());
      std::copy_n(act.bank.data(), act.banked * n, out.data() + n);
      out_banked = act.banked;
    }
    maths::finish_pass(b.slices, b.tokens);
  } catch (...) {
    for (std::size_t i = 0; i < feeds.size(); ++i)
      if (feeds[i].tentative) engine::keep_tentative(feeds[i].session->impl(), b.pos0[i], 0);
    throw;
  }
}

}  // namespace k3
