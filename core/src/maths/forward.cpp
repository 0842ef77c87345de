#include "maths/forward.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include <k3/error.hpp>

namespace k3::model {

void WeightSource::embed(std::span<const std::uint32_t> tokens, std::size_t E, float* P) {
  const GlobalWeights& g = global();
  for (std::size_t t = 0; t < tokens.size(); ++t) g.embed_tokens.row(tokens[t], P + t * E);
}

void WeightSource::head(const Ops& ops, const float* x, std::size_t n, float* logits) {
  ops.matmul(global().lm_head, x, n, logits);
}

void reserve_state(SequenceState& st, const ModelConfig& c, std::int64_t max_positions) {
  const auto positions = static_cast<std::size_t>(std::max<std::int64_t>(0, max_positions));
  st.tokens.reserve(positions);
  st.mla.resize(static_cast<std::size_t>(c.num_hidden_layers));
  for (std::size_t i = 0; i < st.mla.size(); ++i)
    if (c.is_mla(static_cast<std::int64_t>(i)))
      st.mla[i].latent.reserve(positions * static_cast<std::size_t>(c.kv_lora_rank + c.qk_rope_head_dim));
}

SequenceState make_state(const ModelConfig& c, std::int64_t max_positions) {
  SequenceState st;
  reserve_state(st, c, max_positions);
  const auto layers = static_cast<std::size_t>(c.num_hidden_layers);
  st.kda.resize(layers);
  st.mla.resize(layers);
  const auto H = static_cast<std::size_t>(c.kda_num_heads), D = static_cast<std::size_t>(c.kda_head_dim);
  const auto K = static_cast<std::size_t>(c.short_conv_kernel_size);
  for (std::size_t i = 0; i < layers; ++i) {
    if (!c.is_mla(static_cast<std::int64_t>(i))) {
      st.kda[i].S.assign(H * D * D, 0.0f);
      st.kda[i].conv_q.assign(H * D * (K - 1), 0.0f);
      st.kda[i].conv_k.assign(H * D * (K - 1), 0.0f);
      st.kda[i].conv_v.assign(H * D * (K - 1), 0.0f);
    }
  }
  return st;
}

namespace {

/// A NaN or infinity in the residual stream spreads to every later layer and to the logits,
/// and the argmax of such logits is an arbitrary id. Checked after every block (T·E floats
/// against the block's matrix products: nothing measurable), so the error names where the
/// values first went wrong instead of a run ending with exit 0 and garbage ids.
/// Returns the index of the first non-finite value, or T·E.
std::size_t first_non_finite(const float* P, std::size_t n) {
  for (std::size_t k = 0; k < n; ++k)
    if (!std::isfinite(P[k])) return k;
  return n;
}

[[noreturn]] void non_finite(float v, std::size_t k, std::size_t E, std::int64_t pos0, std::size_t layer,
                             const char* block) {
  throw RuntimeError("non-finite value (" + std::string(std::isnan(v) ? "NaN" : "infinity") +
                     ") in the residual stream after the " + block + " of layer " + std::to_string(layer) +
                     " at position " + std::to_string(pos0 + static_cast<std::int64_t>(k / E)) +
                     ": the checkpoint's weights of that layer hold non-finite or overflowing values");
}

}  // namespace

void forward(ForwardContext& ctx, SequenceState& st, std::span<const std::uint32_t> tokens, bool all_positions,
             float* logits) {
  const ModelConfig& c = ctx.config;
  const Ops& ops = ctx.ops;
  RunBuffers& buf = ctx.buffers;
  const auto E = static_cast<std::size_t>(c.hidden_size);
  const auto V = static_cast<std::size_t>(c.vocab_size);
  const std::size_t T = tokens.size();
  const auto B = static_cast<std::size_t>(c.attn_res_block_size);
  const double eps = c.rms_norm_eps;
  const GlobalWeights& g = ctx.weights.global();
  if (T > buf.sizes().chunk || static_cast<std::uint64_t>(st.position) + T > buf.sizes().positions)
    throw RuntimeError("forward: " + std::to_string(T) + " tokens at position " + std::to_string(st.position) +
                       " exceed the run buffers (" + std::to_string(buf.sizes().chunk) + " per chunk, " +
                       std::to_string(buf.sizes().positions) + " positions)");

  // P = the embedding rows (exact bf16 → fp32). P, h, hn, a are [T, E] in the run buffers.
  StackBuffers& sb = buf.stack;
  const std::size_t n = T * E;
  float* P = sb.prefix.data();
  float* h = sb.h.data();
  float* hn = sb.normed.data();
  float* a = sb.out.data();
  for (std::size_t t = 0; t < T; ++t)
    if (tokens[t] >= V) throw UsageError("token id " + std::to_string(tokens[t]) + " is outside the vocabulary (" +
                                         std::to_string(V) + ")");
  ctx.weights.embed(tokens, E, P);
  std::size_t banked = 0;  // block snapshots, each [T, E], in sb.bank
  auto snapshot = [&](std::size_t k) { return sb.bank.data() + k * n; };
  auto aggregate = [&](const float* prefix, const F32Vector& norm_w, const F32Vector& proj_w,
                       float* out) {
    for (std::size_t t = 0; t < T; ++t) {
      sb.bank_rows.clear();  // capacity blocks + 1: never reallocates
      for (std::size_t k = 0; k < banked; ++k) sb.bank_rows.push_back(snapshot(k) + t * E);
      sb.bank_rows.push_back(prefix + t * E);
      attn_res(ops, sb.bank_rows, norm_w.data(), proj_w.data(), eps, E, out + t * E, buf.attn_res);
    }
  };

  const std::int64_t pos0 = st.position;
  std::array<LookaheadRouter, kMaxLookahead> ahead{};
  TentativeChunk* tentative = ctx.tentative;
  if (tentative != nullptr && tentative->kda.size() < static_cast<std::size_t>(c.num_hidden_layers))
    tentative->kda.resize(static_cast<std::size_t>(c.num_hidden_layers));
  for (std::size_t i = 0; i < static_cast<std::size_t>(c.num_hidden_layers); ++i) {
    const LayerWeights& lw = ctx.weights.acquire_layer(i);
    // 1. h = bank non-empty ? AR(P, bank; self_attention_res_*) : P
    if (banked == 0)
      std::copy_n(P, n, h);
    else
      aggregate(P, lw.attn_res_norm, lw.attn_res_proj, h);
    // 2. at a block boundary the running prefix becomes a snapshot and starts over
    const bool boundary = i % B == 0;
    if (boundary) std::copy_n(P, n, snapshot(banked++));
    // 3. a = Attn_i(RMSNorm(h; input_layernorm)); P = (P is none) ? a : P + a
    for (std::size_t t = 0; t < T; ++t) ops.rmsnorm(&h[t * E], lw.input_layernorm.data(), eps, E, &hn[t * E]);
    if (lw.mla)
      mla(ops, c, lw.mla_w, st.mla[i], pos0, hn, T, a, buf.mla);
    else
      kda(ops, c, lw.kda, st.kda[i], hn, T, a, buf.kda,
          tentative != nullptr ? KdaRecord{&tentative->kda[i], &tentative->scratch} : KdaRecord{});
    if (boundary)
      std::copy_n(a, n, P);
    else
      for (std::size_t k = 0; k < n; ++k) P[k] += a[k];
    const std::size_t bad_after_attention = first_non_finite(P, n);
    const float bad_attention_value = bad_after_attention < n ? P[bad_after_attention] : 0.0f;
    // 4. h2 = AR(P, bank; mlp_res_*)   (bank is non-empty from layer 0 on)
    aggregate(P, lw.mlp_res_norm, lw.mlp_res_proj, h);
    // 5. m = FFN_i(RMSNorm(h2; post_attention_layernorm)); P = P + m
    for (std::size_t t = 0; t < T; ++t)
      ops.rmsnorm(&h[t * E], lw.post_attention_layernorm.data(), eps, E, &hn[t * E]);
    // Router lookahead: the next layers' routers that are at hand (never waited for),
    // within this forward pass (the next token's hidden state is not known yet).
    const std::size_t depth = std::min(ctx.experts.lookahead_depth(), kMaxLookahead);
    std::size_t n_ahead = 0;
    for (std::size_t j = i + 1; j <= i + depth && j < static_cast<std::size_t>(c.num_hidden_layers); ++j)
      if (!c.is_dense(static_cast<std::int64_t>(j)))
        if (const MoeWeights* r = ctx.weights.router_at_hand(j)) ahead[n_ahead++] = {j, r};
    if (lw.dense) {
      // No reads of its own: the first MoE layers' guesses go out before the dense FFN.
      for (std::size_t k = 0; k < n_ahead; ++k) predict_ahead(ops, c, i, ahead[k], ctx.experts, hn, T, buf.moe);
      dense_mlp(ops, c, lw.dense_w, hn, T, a, buf.dense);
    } else {
      latent_moe(ops, c, i, lw.moe, ctx.experts, ctx.observer, pos0, hn, T, a, buf.moe,
                 std::span<const LookaheadRouter>(ahead.data(), n_ahead));
    }
    for (std::size_t k = 0; k < n; ++k) P[k] += a[k];
    ctx.weights.release_layer(i);
    // Raised once the layer is released, so a streamed trunk is left as it would be.
    if (bad_after_attention < n) non_finite(bad_attention_value, bad_after_attention, E, pos0, i, "attention");
    if (const std::size_t k = first_non_finite(P, n); k < n) non_finite(P[k], k, E, pos0, i, "FFN");
  }

  // End: h = AR(P, bank; output_attn_res_*); logits = lm_head · RMSNorm(h; norm).
  const std::size_t first = all_positions ? 0 : T - 1;
  const std::size_t n_out = T - first;
  aggregate(P, g.out_res_norm, g.out_res_proj, h);
  for (std::size_t t = first; t < T; ++t) ops.rmsnorm(&h[t * E], g.norm.data(), eps, E, &hn[(t - first) * E]);
  ctx.weights.head(ops, hn, n_out, logits);

  st.position += static_cast<std::int64_t>(T);
  st.tokens.insert(st.tokens.end(), tokens.begin(), tokens.end());  // reserved: see make_state
}

void keep_tentative(const ModelConfig& c, SequenceState& st, const TentativeChunk& chunk, std::int64_t pos0,
                    std::size_t keep, KdaBuffers& buffers) {
  const auto end = static_cast<std::size_t>(pos0) + keep;
  if (st.tokens.size() < end) throw RuntimeError("keep_tentative: the chunk was not fed");
  st.position = static_cast<std::int64_t>(end);
  st.tokens.resize(end);
  const auto LAT = static_cast<std::size_t>(c.kv_lora_rank + c.qk_rope_head_dim);
  for (std::size_t i = 0; i < static_cast<std::size_t>(c.num_hidden_layers); ++i) {
    if (c.is_mla(static_cast<std::int64_t>(i))) {
      if (st.mla[i].latent.size() > end * LAT) st.mla[i].latent.resize(end * LAT);
    } else if (keep > 0) {
      if (keep > chunk.kda.at(i).tokens) throw RuntimeError("keep_tentative: more tokens than the chunk recorded");
      kda_keep(c, chunk.kda[i], keep, st.kda[i], buffers);
    }
  }
}

}  // namespace k3::model
