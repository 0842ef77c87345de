// The decoder stack's entry points for one sequence, and its carried state: a fresh state,
// reserving it, keeping a prefix of a tentative chunk. The pass itself: maths/pass.cpp.
#include "maths/forward.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <k3/error.hpp>

#include "maths/pass.hpp"

namespace k3::maths {

void WeightSource::embed(std::span<const std::uint32_t> tokens, std::size_t E, float* P) {
  const GlobalWeights& g = global();
  for (std::size_t t = 0; t < tokens.size(); ++t) g.embed_tokens.row(tokens[t], P + t * E);
}

void WeightSource::head(const Ops& ops, const float* x, std::size_t n, float* logits) {
  ops.matmul(global().lm_head, x, n, logits);
}

void reserve_state(SequenceState& st, const ModelConfig& c, std::int64_t max_positions, std::size_t first,
                   std::size_t last) {
  const auto positions = static_cast<std::size_t>(std::max<std::int64_t>(0, max_positions));
  st.tokens.reserve(positions);
  st.mla.resize(static_cast<std::size_t>(c.num_hidden_layers));
  for (std::size_t i = first; i < std::min(last, st.mla.size()); ++i)
    if (c.is_mla(static_cast<std::int64_t>(i)))
      st.mla[i].latent.reserve(positions * static_cast<std::size_t>(c.kv_lora_rank + c.qk_rope_head_dim));
}

SequenceState make_state(const ModelConfig& c, std::int64_t max_positions, std::size_t first, std::size_t last) {
  SequenceState st;
  reserve_state(st, c, max_positions, first, last);
  const auto layers = static_cast<std::size_t>(c.num_hidden_layers);
  st.kda.resize(layers);
  st.mla.resize(layers);
  const auto H = static_cast<std::size_t>(c.kda_num_heads), D = static_cast<std::size_t>(c.kda_head_dim);
  const auto K = static_cast<std::size_t>(c.short_conv_kernel_size);
  for (std::size_t i = first; i < std::min(last, layers); ++i) {
    if (!c.is_mla(static_cast<std::int64_t>(i))) {
      st.kda[i].S.assign(H * D * D, 0.0f);
      st.kda[i].conv_q.assign(H * D * (K - 1), 0.0f);
      st.kda[i].conv_k.assign(H * D * (K - 1), 0.0f);
      st.kda[i].conv_v.assign(H * D * (K - 1), 0.0f);
    }
  }
  return st;
}

void forward(ForwardContext& ctx, SequenceState& st, std::span<const std::uint32_t> tokens, bool all_positions,
             float* logits, TentativeChunk* tentative) {
  const SeqSlice one{&st, 0, tokens.size(), all_positions, tentative};
  forward_pass(ctx, std::span<const SeqSlice>(&one, 1), tokens, logits);
}

void keep_tentative(const ModelConfig& c, SequenceState& st, const TentativeChunk& chunk, std::int64_t pos0,
                    std::size_t keep, KdaBuffers& buffers, std::size_t first, std::size_t last) {
  const auto end = static_cast<std::size_t>(pos0) + keep;
  if (st.tokens.size() < end) throw RuntimeError("keep_tentative: the chunk was not fed");
  st.position = static_cast<std::int64_t>(end);
  st.tokens.resize(end);
  const auto LAT = static_cast<std::size_t>(c.kv_lora_rank + c.qk_rope_head_dim);
  // Only the layers that ran the chunk: a rank of a model split over ranks runs its own.
  for (std::size_t i = first; i < std::min(last, static_cast<std::size_t>(c.num_hidden_layers)); ++i) {
    if (c.is_mla(static_cast<std::int64_t>(i))) {
      if (st.mla[i].latent.size() > end * LAT) st.mla[i].latent.resize(end * LAT);
    } else if (keep > 0) {
      if (keep > chunk.kda.at(i).tokens) throw RuntimeError("keep_tentative: more tokens than the chunk recorded");
      kda_keep(c, chunk.kda[i], keep, st.kda[i], buffers);
    }
  }
}

}  // namespace k3::maths
