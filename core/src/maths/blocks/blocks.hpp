// One function per block of docs/model-spec.md §3. Each takes a chunk of T tokens laid out
// [T, width] row-major; tokens are independent except where the block carries state
// (KDA recurrence, MLA cache), which is walked in token order. A chunk may hold the tokens
// of several sequences (a batched pass): each sequence's rows are one slice (SeqSlice), the
// blocks with state walk each slice on its own state, and everything else runs once over
// all T rows, so every weight is read once for all of them. Math only: no I/O, no cache or
// dispatch decisions (experts arrive through an ExpertSource). Each block works in its
// group of the run buffers (maths/run_buffers.hpp), sized for T up to the planned chunk.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include <k3/model_config.hpp>

#include "maths/ops.hpp"
#include "maths/run_buffers.hpp"
#include "maths/state.hpp"
#include "maths/tentative.hpp"
#include "maths/weights.hpp"

namespace k3::maths {

/// AttnRes aggregation AR(rows; proj, norm) for ONE token: rows = [bank_0 … bank_{n-1}, P],
/// each [E]. out [E].
void attn_res(const Ops& ops, std::span<const float* const> rows, const float* norm_w, const float* proj_w, double eps,
              std::size_t E, float* out, AttnResBuffers& b);

/// One sequence's rows of a chunk: rows [first, first + rows) of every [T, width] buffer,
/// at positions state->position … (the state is advanced only after the whole pass). A
/// sequence alone is one slice of all T rows. Bit identity: a slice's rows see the same
/// operations on the same values whatever else shares the chunk (the matrix products give
/// each row the batch-1 bits; the recurrent parts read only the slice's own state).
struct SeqSlice {
  SequenceState* state = nullptr;
  std::size_t first = 0;
  std::size_t rows = 0;
  bool all_positions = false;  ///< logits for every row, else for its last (maths/pass.hpp)
  /// Set for a tentative chunk (maths/tentative.hpp): the KDA states are left as they were
  /// and each layer's updates are recorded here, to be kept with keep_tentative().
  TentativeChunk* tentative = nullptr;
};

/// Where a tentative chunk's KDA layer runs and records (maths/tentative.hpp); both null for
/// an ordinary chunk.
struct KdaRecord {
  KdaJournal* journal = nullptr;
  KdaState* scratch = nullptr;
};

/// KDA of layer `layer` over T tokens (x already input-normed) → out [T, E]. Each slice
/// updates its state's kda[layer], or, for a tentative slice, leaves it as it was and
/// records each token's update in its journal of that layer.
void kda(const Ops& ops, const ModelConfig& c, const KdaWeights& w, std::size_t layer, std::span<const SeqSlice> slices,
         const float* x, std::size_t T, float* out, KdaBuffers& b);

/// Applies the first `keep` recorded updates of a tentative chunk to `state`: afterwards it
/// is bit for bit what kda() over those tokens alone would have left.
void kda_keep(const ModelConfig& c, const KdaJournal& journal, std::size_t keep, KdaState& state, KdaBuffers& b);

/// MLA of layer `layer` over T tokens → out [T, E]; each slice's tokens, at its positions
/// state->position …, are appended to its state's mla[layer] cache and attend over it.
void mla(const Ops& ops, const ModelConfig& c, const MlaWeights& w, std::size_t layer, std::span<const SeqSlice> slices,
         const float* x, std::size_t T, float* out, MlaBuffers& b);

/// Where routed experts come from. The resident source hands out pointers; a streaming
/// source reads the misses in disk order and holds leases until release(). Call order per
/// MoE layer: route() once with every request, then for each batch of at most max_batch()
/// distinct ids: request() (starts the reads, returns at once), then for each id in order
/// wait_one() and compute — the first experts are multiplied while later ones are still
/// being read — and release().
class ExpertSource {
 public:
  virtual ~ExpertSource() = default;
  /// Every (token, expert) request of the chunk for `layer`, token-major, top-k order.
  virtual void route(std::size_t /*layer*/, std::span<const std::uint32_t> /*requests*/) {}
  /// The most distinct experts one request() may name (the cache's leasable slots).
  [[nodiscard]] virtual std::size_t max_batch() const { return static_cast<std::size_t>(-1); }
  /// Starts making the experts `ids` of `layer` available (non-blocking).
  virtual void request(std::size_t layer, std::span<const std::uint32_t> ids) = 0;
  /// Blocks until ids[i] of request() is there and returns it. An expert that could not be
  /// loaded has null matrices (w1.packed == nullptr): its contribution is zero and the run's
  /// ids are unsound (the source records the failure).
  virtual ExpertWeights wait_one(std::size_t layer, std::size_t i) = 0;
  /// Ends the use of everything requested for `layer`.
  virtual void release(std::size_t layer) = 0;

  /// Router lookahead (docs/cache.md "Router-lookahead prefetch"): how many MoE layers
  /// ahead the source wants predicted (0 = none).
  [[nodiscard]] virtual std::size_t lookahead_depth() const { return 0; }
  /// A hint, called while `from_layer` computes, after its reads started: the `tokens`
  /// tokens of the chunk will likely choose `ids` (distinct, likeliest first) at the later
  /// `layer`. Non-blocking; the source may read some of them ahead or ignore it. Never
  /// changes what request() hands out, so never a bit of the output.
  virtual void prefetch(std::size_t /*from_layer*/, std::size_t /*layer*/, std::span<const std::uint32_t> /*ids*/,
                        std::size_t /*tokens*/) {}
};

/// The most layers the router lookahead predicts (cache.prefetch.depth's range).
inline constexpr std::size_t kMaxLookahead = 4;

class RouterCopy;

/// A later MoE layer's router at hand while the current layer computes (the weights stay
/// valid until the current layer is released): its exact router (`moe`), or else its
/// resident approximate copy (`copy`, maths/router_copy.hpp).
struct LookaheadRouter {
  std::size_t layer = 0;
  const MoeWeights* moe = nullptr;
  const RouterCopy* copy = nullptr;
};

/// Observes every expert request (token position, layer, expert) in request order.
class RoutingObserver {
 public:
  virtual ~RoutingObserver() = default;
  /// A serving group starts: the next `tokens` on_route calls (one forward chunk at `layer`)
  /// are served together by the expert source.
  virtual void on_group(std::size_t /*layer*/, std::size_t /*tokens*/) {}
  /// In a chunk of several sequences: the on_route calls that follow are slice `index`'s
  /// (called before each slice's first row, after on_group).
  virtual void on_slice(std::size_t /*index*/) {}
  virtual void on_route(std::int64_t position, std::size_t layer, std::span<const std::uint32_t> experts) = 0;
};

/// Router + Stable LatentMoE + shared experts over T tokens → out [T, E]; each chosen expert
/// is multiplied once for every row of every slice that chose it. `slices` give the rows'
/// positions the observer sees. `ahead`: later layers' routers, applied to x once this
/// layer's reads started, their likely experts handed to experts.prefetch() (reads ahead
/// only: the output is the same without them).
void latent_moe(const Ops& ops, const ModelConfig& c, std::size_t layer, const MoeWeights& w, ExpertSource& experts,
                RoutingObserver* observer, std::span<const SeqSlice> slices, const float* x, std::size_t T, float* out,
                MoeBuffers& b, std::span<const LookaheadRouter> ahead = {});

/// Router lookahead: applies the later layer's router `ahead` to x [T, E] (the input of
/// `layer`'s FFN; the same selection as the router's) and hands the experts any token would
/// choose, likeliest first, to experts.prefetch(). Uses b's logits, choice and ahead_*.
void predict_ahead(const Ops& ops, const ModelConfig& c, std::size_t layer, const LookaheadRouter& ahead,
                   ExpertSource& experts, const float* x, std::size_t T, MoeBuffers& b);

/// Dense SiTU MLP over T tokens → out [T, E].
void dense_mlp(const Ops& ops, const ModelConfig& c, const DenseMlpWeights& w, const float* x, std::size_t T,
               float* out, DenseBuffers& b);

}  // namespace k3::maths
