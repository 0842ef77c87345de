// The forward pass over a batch of sequences, stage by stage (maths/pass.hpp).
#include "maths/pass.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include <k3/error.hpp>

namespace k3::maths {
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

/// The position of row `row`: its slice's start position plus its place in the slice.
std::int64_t position_of(std::span<const SeqSlice> slices, std::size_t row) {
  for (const SeqSlice& s : slices)
    if (row < s.first + s.rows) return s.state->position + static_cast<std::int64_t>(row - s.first);
  return 0;
}

[[noreturn]] void non_finite(float v, std::size_t k, std::size_t E, std::span<const SeqSlice> slices, std::size_t layer,
                             const char* block) {
  throw RuntimeError("non-finite value (" + std::string(std::isnan(v) ? "NaN" : "infinity") +
                     ") in the residual stream after the " + block + " of layer " + std::to_string(layer) +
                     " at position " + std::to_string(position_of(slices, k / E)) +
                     ": the checkpoint's weights of that layer hold non-finite or overflowing values");
}

/// AR(rows; norm, proj) for every row: each row aggregates its own bank snapshots and prefix.
void aggregate(const Ops& ops, RunBuffers& buf, const Activations& act, std::size_t E, double eps, const float* prefix,
               const F32Vector& norm_w, const F32Vector& proj_w, float* out) {
  StackBuffers& sb = buf.stack;
  const std::size_t n = act.rows * E;
  for (std::size_t t = 0; t < act.rows; ++t) {
    sb.bank_rows.clear();  // capacity blocks + 1: never reallocates
    for (std::size_t k = 0; k < act.banked; ++k) sb.bank_rows.push_back(act.bank.data() + k * n + t * E);
    sb.bank_rows.push_back(prefix + t * E);
    attn_res(ops, sb.bank_rows, norm_w.data(), proj_w.data(), eps, E, out + t * E, buf.attn_res);
  }
}

}  // namespace

std::size_t logit_rows(std::span<const SeqSlice> slices) noexcept {
  std::size_t n = 0;
  for (const SeqSlice& s : slices) n += s.all_positions ? s.rows : 1;
  return n;
}

namespace {

/// begin_pass's checks: rows within the run buffers, slices in order and distinct, ids
/// within the vocabulary; journals sized for a tentative slice.
void check_pass(ForwardContext& ctx, std::span<const SeqSlice> slices, std::span<const std::uint32_t> tokens) {
  const ModelConfig& c = ctx.config;
  RunBuffers& buf = ctx.buffers;
  const auto V = static_cast<std::size_t>(c.vocab_size);
  const std::size_t T = tokens.size();
  if (T > buf.sizes().chunk)
    throw RuntimeError("forward: " + std::to_string(T) + " tokens exceed the run buffers (" +
                       std::to_string(buf.sizes().chunk) + " per pass)");
  std::size_t next_row = 0;
  for (std::size_t i = 0; i < slices.size(); ++i) {
    const SeqSlice& s = slices[i];
    if (s.state == nullptr || s.rows == 0 || s.first != next_row)
      throw RuntimeError("forward: slice " + std::to_string(i) + " does not follow the rows before it");
    next_row += s.rows;
    if (static_cast<std::uint64_t>(s.state->position) + s.rows > buf.sizes().positions)
      throw RuntimeError("forward: " + std::to_string(s.rows) + " tokens at position " +
                         std::to_string(s.state->position) + " exceed the run buffers (" +
                         std::to_string(buf.sizes().positions) + " positions)");
    for (std::size_t j = 0; j < i; ++j)
      if (slices[j].state == s.state) throw RuntimeError("forward: one sequence is twice in a pass");
    if (s.tentative != nullptr && s.tentative->kda.size() < static_cast<std::size_t>(c.num_hidden_layers))
      s.tentative->kda.resize(static_cast<std::size_t>(c.num_hidden_layers));
  }
  if (next_row != T) throw RuntimeError("forward: the slices do not cover the pass's tokens");
  for (std::size_t t = 0; t < T; ++t)
    if (tokens[t] >= V)
      throw UsageError("token id " + std::to_string(tokens[t]) + " is outside the vocabulary (" + std::to_string(V) +
                       ")");
}

}  // namespace

std::size_t banked_before(const ModelConfig& c, std::size_t layer) noexcept {
  const auto B = static_cast<std::size_t>(std::max<std::int64_t>(1, c.attn_res_block_size));
  return (layer + B - 1) / B;
}

Activations begin_pass(ForwardContext& ctx, std::span<const SeqSlice> slices, std::span<const std::uint32_t> tokens) {
  check_pass(ctx, slices, tokens);
  const auto E = static_cast<std::size_t>(ctx.config.hidden_size);
  const std::size_t T = tokens.size();
  RunBuffers& buf = ctx.buffers;
  // P = the embedding rows (exact bf16 → fp32). P, h, hn, a are [T, E] in the run buffers.
  StackBuffers& sb = buf.stack;
  ctx.weights.embed(tokens, E, sb.prefix.data());
  return Activations{T, 0, std::span<float>(sb.prefix.data(), T * E), std::span<float>(sb.bank)};
}

Activations resume_pass(ForwardContext& ctx, std::span<const SeqSlice> slices, std::span<const std::uint32_t> tokens,
                        std::size_t first, std::span<const float> in, std::size_t banked) {
  check_pass(ctx, slices, tokens);
  const auto E = static_cast<std::size_t>(ctx.config.hidden_size);
  const std::size_t T = tokens.size();
  const std::size_t n = T * E;
  StackBuffers& sb = ctx.buffers.stack;
  if (banked != banked_before(ctx.config, first))
    throw RuntimeError("forward: activations for layer " + std::to_string(first) + " with " + std::to_string(banked) +
                       " block snapshots where " + std::to_string(banked_before(ctx.config, first)) + " are taken");
  if (in.size() != (1 + banked) * n || banked * n > sb.bank.size())
    throw RuntimeError("forward: " + std::to_string(in.size()) + " floats of activations for " + std::to_string(T) +
                       " rows where " + std::to_string((1 + banked) * n) + " were expected");
  std::copy_n(in.data(), n, sb.prefix.data());
  std::copy_n(in.data() + n, banked * n, sb.bank.data());
  return Activations{T, banked, std::span<float>(sb.prefix.data(), n), std::span<float>(sb.bank)};
}

void run_layers(ForwardContext& ctx, std::size_t first, std::size_t last, std::span<const SeqSlice> slices,
                Activations& act) {
  const ModelConfig& c = ctx.config;
  const Ops& ops = ctx.ops;
  RunBuffers& buf = ctx.buffers;
  const auto E = static_cast<std::size_t>(c.hidden_size);
  const std::size_t T = act.rows;
  const auto B = static_cast<std::size_t>(c.attn_res_block_size);
  const auto layers = static_cast<std::size_t>(c.num_hidden_layers);
  const double eps = c.rms_norm_eps;
  StackBuffers& sb = buf.stack;
  const std::size_t n = T * E;
  float* P = act.prefix.data();
  float* h = sb.h.data();
  float* hn = sb.normed.data();
  float* a = sb.out.data();
  std::array<LookaheadRouter, kMaxLookahead> ahead{};
  for (std::size_t i = first; i < last; ++i) {
    const LayerWeights& lw = ctx.weights.acquire_layer(i);
    // 1. h = bank non-empty ? AR(P, bank; self_attention_res_*) : P
    if (act.banked == 0)
      std::copy_n(P, n, h);
    else
      aggregate(ops, buf, act, E, eps, P, lw.attn_res_norm, lw.attn_res_proj, h);
    // 2. at a block boundary the running prefix becomes a snapshot and starts over
    const bool boundary = i % B == 0;
    if (boundary) std::copy_n(P, n, act.bank.data() + (act.banked++) * n);
    // 3. a = Attn_i(RMSNorm(h; input_layernorm)); P = (P is none) ? a : P + a
    for (std::size_t t = 0; t < T; ++t) ops.rmsnorm(&h[t * E], lw.input_layernorm.data(), eps, E, &hn[t * E]);
    if (lw.mla)
      mla(ops, c, lw.mla_w, i, slices, hn, T, a, buf.mla);
    else
      kda(ops, c, lw.kda, i, slices, hn, T, a, buf.kda);
    if (boundary)
      std::copy_n(a, n, P);
    else
      for (std::size_t k = 0; k < n; ++k) P[k] += a[k];
    const std::size_t bad_after_attention = first_non_finite(P, n);
    const float bad_attention_value = bad_after_attention < n ? P[bad_after_attention] : 0.0f;
    // 4. h2 = AR(P, bank; mlp_res_*)   (bank is non-empty from layer 0 on)
    aggregate(ops, buf, act, E, eps, P, lw.mlp_res_norm, lw.mlp_res_proj, h);
    // 5. m = FFN_i(RMSNorm(h2; post_attention_layernorm)); P = P + m
    for (std::size_t t = 0; t < T; ++t) ops.rmsnorm(&h[t * E], lw.post_attention_layernorm.data(), eps, E, &hn[t * E]);
    // Router lookahead: the next layers' routers that are at hand (never waited for),
    // within this forward pass (the next token's hidden state is not known yet).
    const std::size_t depth = std::min(ctx.experts.lookahead_depth(), kMaxLookahead);
    std::size_t n_ahead = 0;
    // A layer whose exact router is not at hand is predicted by its resident copy, if any.
    for (std::size_t j = i + 1; j <= i + depth && j < layers; ++j) {
      if (c.is_dense(static_cast<std::int64_t>(j))) continue;
      if (const MoeWeights* r = ctx.weights.router_at_hand(j))
        ahead[n_ahead++] = {j, r, nullptr};
      else if (const RouterCopy* copy = ctx.weights.router_copy(j))
        ahead[n_ahead++] = {j, nullptr, copy};
    }
    if (lw.dense) {
      // No reads of its own: the first MoE layers' guesses go out before the dense FFN.
      for (std::size_t k = 0; k < n_ahead; ++k) predict_ahead(ops, c, i, ahead[k], ctx.experts, hn, T, buf.moe);
      dense_mlp(ops, c, lw.dense_w, hn, T, a, buf.dense);
    } else {
      latent_moe(ops, c, i, lw.moe, ctx.experts, ctx.observer, slices, hn, T, a, buf.moe,
                 std::span<const LookaheadRouter>(ahead.data(), n_ahead));
    }
    for (std::size_t k = 0; k < n; ++k) P[k] += a[k];
    ctx.weights.release_layer(i);
    // Raised once the layer is released, so a streamed trunk is left as it would be.
    if (bad_after_attention < n) non_finite(bad_attention_value, bad_after_attention, E, slices, i, "attention");
    if (const std::size_t k = first_non_finite(P, n); k < n) non_finite(P[k], k, E, slices, i, "FFN");
  }
}

std::size_t end_pass(ForwardContext& ctx, std::span<const SeqSlice> slices, const Activations& act, float* logits) {
  // End: h = AR(P, bank; output_attn_res_*); logits = lm_head · RMSNorm(h; norm), for the
  // rows that want logits (each slice's every row, or its last).
  const ModelConfig& c = ctx.config;
  const Ops& ops = ctx.ops;
  RunBuffers& buf = ctx.buffers;
  const auto E = static_cast<std::size_t>(c.hidden_size);
  const GlobalWeights& g = ctx.weights.global();
  float* h = buf.stack.h.data();
  float* hn = buf.stack.normed.data();
  aggregate(ops, buf, act, E, c.rms_norm_eps, act.prefix.data(), g.out_res_norm, g.out_res_proj, h);
  std::size_t n_out = 0;
  for (const SeqSlice& s : slices)
    for (std::size_t t = s.all_positions ? s.first : s.first + s.rows - 1; t < s.first + s.rows; ++t)
      ops.rmsnorm(&h[t * E], g.norm.data(), c.rms_norm_eps, E, &hn[(n_out++) * E]);
  ctx.weights.head(ops, hn, n_out, logits);
  return n_out;
}

void finish_pass(std::span<const SeqSlice> slices, std::span<const std::uint32_t> tokens) {
  for (const SeqSlice& s : slices) {
    s.state->position += static_cast<std::int64_t>(s.rows);
    const auto from = tokens.begin() + static_cast<std::ptrdiff_t>(s.first);
    s.state->tokens.insert(s.state->tokens.end(), from, from + static_cast<std::ptrdiff_t>(s.rows));  // reserved
  }
}

void forward_pass(ForwardContext& ctx, std::span<const SeqSlice> slices, std::span<const std::uint32_t> tokens,
                  float* logits) {
  Activations act = begin_pass(ctx, slices, tokens);
  run_layers(ctx, 0, static_cast<std::size_t>(ctx.config.num_hidden_layers), slices, act);
  end_pass(ctx, slices, act, logits);
  finish_pass(slices, tokens);
}

}  // namespace k3::maths
