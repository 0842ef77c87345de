// The decoder stack (docs/model-spec.md §3 "Decoder layer i" and "End"), over a chunk of tokens.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include <k3/model_config.hpp>

#include "maths/blocks/blocks.hpp"

namespace k3::maths {

/// Where the non-expert weights come from: resident, or streamed layer by layer. A layer is
/// acquired before use and released after; the small global tensors are always available.
/// The embedding table and lm_head are reached only through embed() and head(), so a
/// streaming source can read rows on demand.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  [[nodiscard]] virtual const GlobalWeights& global() = 0;
  virtual const LayerWeights& acquire_layer(std::size_t layer) = 0;
  virtual void release_layer(std::size_t layer) = 0;
  /// MoE layer `layer`'s router (gate and bias) if it is at hand without waiting (resident,
  /// pinned, or already read ahead), else null; valid until the layer being computed is
  /// released. For the router lookahead (ExpertSource::lookahead_depth()).
  [[nodiscard]] virtual const MoeWeights* router_at_hand(std::size_t /*layer*/) { return nullptr; }
  /// An approximate copy of MoE layer `layer`'s router kept resident for the lookahead
  /// (cache.prefetch.router int8/int4) when its exact router is not at hand; null if none.
  [[nodiscard]] virtual const RouterCopy* router_copy(std::size_t /*layer*/) { return nullptr; }
  /// P[t, :] = the embedding row of tokens[t], bf16 widened to fp32 (ids already checked).
  /// Default: from global().embed_tokens.
  virtual void embed(std::span<const std::uint32_t> tokens, std::size_t E, float* P);
  /// logits [n, V] = lm_head · x [n, E]. Default: one matmul over global().lm_head. A
  /// streaming source may multiply row chunks: output rows are independent, so the bits
  /// are the same.
  virtual void head(const Ops& ops, const float* x, std::size_t n, float* logits);
};

struct ForwardContext {
  const ModelConfig& config;
  const Ops& ops;
  WeightSource& weights;
  ExpertSource& experts;
  RoutingObserver* observer = nullptr;
  RunBuffers& buffers;  ///< sized for this call's chunk and positions (RuntimeError otherwise)
};

/// Runs `tokens` at positions state.position … through every layer, updating the carried
/// state (KDA, MLA cache, position, token history). Writes logits [tokens.size(), V] when
/// all_positions, else [1, V] for the last token. A pass of one sequence (maths/pass.hpp);
/// `tentative` set: a tentative chunk (maths/tentative.hpp), the KDA states are left as
/// they were and each layer's updates recorded there, to be kept with keep_tentative().
void forward(ForwardContext& ctx, SequenceState& state, std::span<const std::uint32_t> tokens, bool all_positions,
             float* logits, TentativeChunk* tentative = nullptr);

/// After forward() ran a tentative chunk that started at position `pos0`: keeps its first
/// `keep` tokens (0 ≤ keep ≤ the chunk's length) and drops the rest, so that the state is
/// bit for bit what feeding only those tokens would have left. With keep = 0 it also undoes
/// a tentative forward() that threw part way. Layers [first, last) ran the chunk (a rank of a
/// model split over ranks runs its own range; the others are not touched).
void keep_tentative(const ModelConfig& c, SequenceState& state, const TentativeChunk& chunk, std::int64_t pos0,
                    std::size_t keep, KdaBuffers& buffers, std::size_t first = 0, std::size_t last = SIZE_MAX);

/// A fresh state for a sequence of up to `max_positions` tokens (KDA zeros, empty caches),
/// for layers [first, last) (a rank of a model split over ranks holds its own range; the
/// other layers' entries stay empty, as the memory plan counts them).
SequenceState make_state(const ModelConfig& c, std::int64_t max_positions, std::size_t first = 0,
                         std::size_t last = SIZE_MAX);
/// Reserves room for `max_positions` tokens in the growing parts of a state (token history,
/// MLA caches of layers [first, last)), so that feeding tokens never reallocates them.
void reserve_state(SequenceState& st, const ModelConfig& c, std::int64_t max_positions, std::size_t first = 0,
                   std::size_t last = SIZE_MAX);

}  // namespace k3::maths
