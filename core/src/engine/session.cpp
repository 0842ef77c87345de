#include <algorithm>

#include <k3/error.hpp>
#include <k3/model.hpp>

#include "engine/live_session.hpp"
#include "engine/model_impl.hpp"
#include "engine/session_impl.hpp"
#include "maths/pass.hpp"

namespace k3 {

Session::Session(Model& model, std::int64_t max_positions) {
  if (max_positions < 1) throw UsageError("a session needs room for at least one token");
  impl_ = std::make_unique<Impl>(
      Impl{model,
           max_positions,
           maths::make_state(model.config(), max_positions, model.plan().first_layer, model.plan().last_layer),
           {},
           {},
           {},
           {},
           std::nullopt,
           nullptr,
           {}});
  impl_->keep_buffers.bk.assign(static_cast<std::size_t>(model.config().kda_head_dim), 0.0);
}

Session::~Session() = default;

namespace engine {

void check_feed(const Session::Impl& s, std::span<const std::uint32_t> tokens) {
  const ModelConfig& c = s.model.config();
  if (tokens.empty()) throw UsageError("feed: no tokens");
  for (std::uint32_t id : tokens)
    if (id >= static_cast<std::uint64_t>(c.vocab_size))
      throw UsageError("token id " + std::to_string(id) + " is outside the vocabulary of " +
                       std::to_string(c.vocab_size) + " ids");
  if (s.state.position + static_cast<std::int64_t>(tokens.size()) > s.max_positions)
    throw UsageError("context full: " + std::to_string(s.state.position) + " + " + std::to_string(tokens.size()) +
                     " tokens exceed the context of " + std::to_string(s.max_positions) + " (raise memory.context)");
  if (s.open_tentative) throw RuntimeError("feed: the session's tentative chunk waits for keep_tentative()");
}

void keep_tentative(Session::Impl& s, std::int64_t pos0, std::size_t keep) {
  s.open_tentative.reset();
  const MemoryPlan& plan = s.model.plan();
  maths::keep_tentative(s.model.config(), s.state, s.tentative, pos0, keep, s.keep_buffers, plan.first_layer,
                        plan.last_layer);
}

}  // namespace engine

namespace {

void check_vocabulary(std::span<const std::uint32_t> tokens, const ModelConfig& c) {
  for (std::uint32_t id : tokens)
    if (id >= static_cast<std::uint64_t>(c.vocab_size))
      throw UsageError("token id " + std::to_string(id) + " is outside the vocabulary of " +
                       std::to_string(c.vocab_size) + " ids");
}

/// Checks `tokens` against the vocabulary and the context and sizes the session's own run
/// buffers for them; UsageError before any compute.
void prepare_feed(Session::Impl& s, std::span<const std::uint32_t> tokens) {
  engine::check_feed(s, tokens);
  const ModelConfig& c = s.model.config();
  // Allocated at the first feed, for the plan's chunk. A chunk longer than the plan's
  // (recompute mode, a caller feeding a whole prompt) gets larger buffers, kept for later
  // calls and at least doubled so that a growing chunk reallocates rarely; the plan's
  // figure assumes chunks of job.prefill_chunk.
  const std::uint64_t have = s.buffers.sizes().chunk;
  if (have == 0 || tokens.size() > have) {
    const auto planned = static_cast<std::int64_t>(s.model.plan().buffers.chunk);
    const std::int64_t grown = have == 0 ? std::max<std::int64_t>(planned, static_cast<std::int64_t>(tokens.size()))
                                         : std::max<std::int64_t>(static_cast<std::int64_t>(tokens.size()),
                                                                  2 * static_cast<std::int64_t>(have));
    s.buffers =
        maths::RunBuffers(run_buffer_sizes(c, std::min(grown, s.max_positions), s.max_positions, s.model.threads()));
  }
}

/// One pass over this session alone (a batch of one, maths/pass.hpp).
void run_one(Session::Impl& s, std::span<const std::uint32_t> tokens, bool all_positions, float* logits,
             maths::TentativeChunk* tentative) {
  Model::Impl& m = s.model.impl();
  SliceListeners listeners;
  RoutingListener* const one[1] = {s.listener};
  const maths::SeqSlice slice{&s.state, 0, tokens.size(), all_positions, tentative};
  listeners.set(one);
  listeners.set_rows({&slice, 1});
  maths::ForwardContext ctx{
      s.model.config(), *m.ops, m.weight_source(), m.expert_source(), s.listener != nullptr ? &listeners : nullptr,
      s.buffers};
  maths::forward_pass(ctx, {&slice, 1}, tokens, logits);
}

}  // namespace

void Session::feed(std::span<const std::uint32_t> tokens, bool all_positions, std::vector<float>& logits) {
  Impl& s = *impl_;
  prepare_feed(s, tokens);
  logits.resize((all_positions ? tokens.size() : 1) * static_cast<std::size_t>(s.model.config().vocab_size));
  run_one(s, tokens, all_positions, logits.data(), nullptr);
}

std::size_t Session::feed_tentative(std::span<const std::uint32_t> tokens, std::vector<float>& logits,
                                    const std::function<std::size_t(std::span<const float>)>& keep) {
  Impl& s = *impl_;
  prepare_feed(s, tokens);
  logits.resize(tokens.size() * static_cast<std::size_t>(s.model.config().vocab_size));
  const std::int64_t pos0 = s.state.position;
  std::size_t kept = 0;
  try {
    run_one(s, tokens, true, logits.data(), &s.tentative);
    kept = keep(logits);
    if (kept > tokens.size())
      throw RuntimeError("feed_tentative: asked to keep " + std::to_string(kept) + " of " +
                         std::to_string(tokens.size()) + " tokens");
  } catch (...) {
    engine::keep_tentative(s, pos0, 0);
    throw;
  }
  engine::keep_tentative(s, pos0, kept);
  return kept;
}

void Session::keep_tentative(std::size_t keep) {
  Impl& s = *impl_;
  if (!s.open_tentative) throw RuntimeError("keep_tentative: no tentative chunk was fed");
  const std::int64_t pos0 = *s.open_tentative;
  const auto fed = static_cast<std::size_t>(s.state.position - pos0);
  if (keep > fed)
    throw RuntimeError("keep_tentative: asked to keep " + std::to_string(keep) + " of " + std::to_string(fed) +
                       " tokens");
  engine::keep_tentative(s, pos0, keep);
}

Model& Session::model() const noexcept { return impl_->model; }
const std::vector<std::uint32_t>& Session::tokens() const noexcept { return impl_->state.tokens; }
std::int64_t Session::position() const noexcept { return impl_->state.position; }
std::int64_t Session::max_positions() const noexcept { return impl_->max_positions; }
const std::vector<std::uint32_t>& Session::pending() const noexcept { return impl_->pending; }

void Session::set_pending(std::vector<std::uint32_t> ids) {
  check_vocabulary(ids, impl_->model.config());
  impl_->pending = std::move(ids);
}

void Session::reset() {
  impl_->open_tentative.reset();
  const MemoryPlan& plan = impl_->model.plan();
  impl_->state = maths::make_state(impl_->model.config(), impl_->max_positions, plan.first_layer, plan.last_layer);
  impl_->pending.clear();
  impl_->unsound.clear();
}

void Session::set_routing_listener(RoutingListener* listener) noexcept { impl_->listener = listener; }

void Session::save(const std::filesystem::path& file, std::string_view unsound) const {
  if (impl_->open_tentative) throw RuntimeError("save: the session's tentative chunk waits for keep_tentative()");
  // Once unsound, always: a state resumed from an unsound one is saved unsound too.
  std::string reason = impl_->unsound;
  if (!unsound.empty()) reason += (reason.empty() ? "" : "; ") + std::string(unsound);
  engine::save_state(file, impl_->model.config(), impl_->model.identity().value, impl_->state, impl_->pending, reason);
}

void Session::load(const std::filesystem::path& file, bool accept_unsound) {
  engine::SavedState saved = engine::load_state(file, impl_->model.config(), impl_->max_positions,
                                                impl_->model.identity().value, impl_->model.uri());
  if (!saved.unsound.empty() && !accept_unsound)
    throw UsageError(file.string() + ": the state is unsound (" + saved.unsound +
                     "); continuing it would continue another conversation than the model's, so it is refused "
                     "unless accepted explicitly (job.accept_unsound_state: true)");
  const std::int64_t total = saved.state.position + static_cast<std::int64_t>(saved.pending.size());
  if (total > impl_->max_positions)
    throw UsageError(file.string() + ": the saved conversation has " + std::to_string(total) +
                     " tokens, more than the context of " + std::to_string(impl_->max_positions));
  maths::reserve_state(saved.state, impl_->model.config(), impl_->max_positions, impl_->model.plan().first_layer,
                       impl_->model.plan().last_layer);
  impl_->open_tentative.reset();
  impl_->state = std::move(saved.state);
  impl_->pending = std::move(saved.pending);
  impl_->unsound = std::move(saved.unsound);
}

struct SessionSnapshot::Impl {
  std::uint64_t identity = 0;          ///< the checkpoint identity of the model it came from
  maths::SequenceState state;          ///< exactly sized (no reserved room)
  std::vector<std::uint32_t> pending;  ///< Session::pending
  std::string unsound;                 ///< Session's unsound reason
  std::size_t bytes = 0;
};

namespace {
const std::vector<std::uint32_t> kNoTokens;

std::size_t state_bytes(const maths::SequenceState& st) {
  std::size_t n = st.tokens.size() * sizeof(std::uint32_t);
  for (const auto& k : st.kda) n += (k.S.size() + k.conv_q.size() + k.conv_k.size() + k.conv_v.size()) * sizeof(float);
  for (const auto& m : st.mla) n += m.latent.size() * sizeof(float);
  return n;
}
}  // namespace

const std::vector<std::uint32_t>& SessionSnapshot::tokens() const noexcept {
  return impl_ ? impl_->state.tokens : kNoTokens;
}
const std::vector<std::uint32_t>& SessionSnapshot::pending() const noexcept {
  return impl_ ? impl_->pending : kNoTokens;
}
std::int64_t SessionSnapshot::position() const noexcept { return impl_ ? impl_->state.position : 0; }
std::size_t SessionSnapshot::bytes() const noexcept { return impl_ ? impl_->bytes : 0; }

SessionSnapshot Session::snapshot() const {
  if (impl_->open_tentative) throw RuntimeError("snapshot: the session's tentative chunk waits for keep_tentative()");
  auto impl = std::make_shared<SessionSnapshot::Impl>();
  impl->identity = impl_->model.identity().value;
  // Copy-constructing the vectors keeps their sizes, not the reserved context room.
  impl->state = impl_->state;
  impl->pending = impl_->pending;
  impl->unsound = impl_->unsound;
  impl->bytes = state_bytes(impl->state) + impl->pending.size() * sizeof(std::uint32_t);
  SessionSnapshot snap;
  snap.impl_ = std::move(impl);
  return snap;
}

void Session::restore(const SessionSnapshot& snap) {
  if (snap.empty()) throw UsageError("restore: the snapshot is empty");
  const ModelConfig& c = impl_->model.config();
  if (snap.impl_->identity != impl_->model.identity().value)
    throw UsageError("restore: the snapshot was taken with another checkpoint (identity " +
                     identity_hex(snap.impl_->identity) + ", this model's is " +
                     identity_hex(impl_->model.identity().value) + ")");
  const std::int64_t total = snap.position() + static_cast<std::int64_t>(snap.pending().size());
  if (total > impl_->max_positions)
    throw UsageError("restore: the snapshot holds " + std::to_string(total) + " tokens, more than the context of " +
                     std::to_string(impl_->max_positions));
  maths::SequenceState st = snap.impl_->state;
  maths::reserve_state(st, c, impl_->max_positions, impl_->model.plan().first_layer, impl_->model.plan().last_layer);
  impl_->open_tentative.reset();
  impl_->state = std::move(st);
  impl_->pending = snap.impl_->pending;
  impl_->unsound = snap.impl_->unsound;
}

}  // namespace k3
