// Gated MLA without RoPE (docs/model-spec.md §3 "MLA"), per token:
//  1. q = W_qb · RMSNorm(W_qa x; q_a_layernorm, 1e-6) → per head [q_nope | q_r].
//  2. [c | k_r] = W_kva x; c = RMSNorm(c; kv_a_layernorm, 1e-6); k_r not normed, not rotated.
//  3. per head: k = [W_kb,h c | k_r], v = W_vb,h c; score = q·k / sqrt(nope + rope);
//     causal softmax; o_h = Σ p·v.
//  4. out = W_o ( concat_h o_h ⊙ σ(W_g x) ).
// Latent form (the cache holds only [c | k_r] per position): q_nope·(W_kb,h c) is computed
// as (W_kb,hᵀ q_nope)·c and Σ_s p_s (W_vb,h c_s) as W_vb,h (Σ_s p_s c_s). W_kb,hᵀ q_nope
// uses the contract's 8-way fp64 partition over the nope index.
#include <cmath>

#include "maths/blocks/blocks.hpp"

namespace k3::maths {
namespace {

float widen(std::uint16_t b) noexcept { return bf16_to_f32(b); }
float widen(float f) noexcept { return f; }

/// Adds row d of W times q[d] into the partition accumulators (one loop per element type).
template <class T>
void accumulate_rows(const T* w, std::size_t rows, std::size_t cols, const float* q, double* acc) {
  for (std::size_t d = 0; d < rows; ++d) {
    double* a = acc + (d % 8) * cols;
    const T* row = w + d * cols;
    const double qd = q[d];
    for (std::size_t j = 0; j < cols; ++j) a[j] += double{widen(row[j])} * qd;
  }
}

/// out[j] = Σ_d W[d, j]·q[d] for W [rows = nope, cols = kv_lora] (bf16 or fp32): the
/// transposed product, each column summed in the contract's partition and tree, rounded once.
void transposed_matvec(const Matrix& w, const float* q, float* out, double* acc) {
  for (std::size_t i = 0; i < 8 * w.cols; ++i) acc[i] = 0;
  if (w.f32)
    accumulate_rows(w.fp32(), w.rows, w.cols, q, acc);
  else
    accumulate_rows(w.bf16(), w.rows, w.cols, q, acc);
  for (std::size_t j = 0; j < w.cols; ++j) {
    const auto A = [&](std::size_t p) { return acc[p * w.cols + j]; };
    out[j] = static_cast<float>(((A(0) + A(4)) + (A(2) + A(6))) + ((A(1) + A(5)) + (A(3) + A(7))));
  }
}

}  // namespace

namespace {

/// Attention of one slice (one sequence's tokens, in order) over its cache, which it first
/// extends with the slice's [normed c | k_r]; reads its rows of q, ckv and gate, writes its
/// rows of y.
void mla_attend(const Ops& ops, const ModelConfig& c, const MlaWeights& w, MlaCache& cache, std::int64_t pos0,
                std::size_t row0, std::size_t T, MlaBuffers& b) {
  const auto MH = static_cast<std::size_t>(c.num_attention_heads);
  const auto KVL = static_cast<std::size_t>(c.kv_lora_rank);
  const auto NOPE = static_cast<std::size_t>(c.qk_nope_head_dim);
  const auto ROPE = static_cast<std::size_t>(c.qk_rope_head_dim);
  const auto HV = static_cast<std::size_t>(c.v_head_dim);
  const std::size_t HQ = NOPE + ROPE, LAT = KVL + ROPE;
  constexpr double kMlaEps = 1e-6;  // the two MLA-internal norms (docs/model-spec.md §1)
  const float* q = b.q.data() + row0 * MH * HQ;
  const float* ckv = b.ckv.data() + row0 * LAT;
  const float* gate = b.gate.data() + row0 * MH * HV;
  float* y = b.y.data() + row0 * MH * HV;

  // Append [normed c | k_r] of every token of the slice to the cache.
  const auto first = static_cast<std::size_t>(pos0);
  cache.latent.resize((first + T) * LAT);
  for (std::size_t t = 0; t < T; ++t) {
    float* dst = cache.latent.data() + (first + t) * LAT;
    ops.rmsnorm(ckv + t * LAT, w.kv_a_layernorm.data(), kMlaEps, KVL, dst);
    for (std::size_t r = 0; r < ROPE; ++r) dst[KVL + r] = ckv[t * LAT + KVL + r];
  }

  float* qlat = b.qlat.data();
  float* cbar = b.cbar.data();
  const double scale = 1.0 / std::sqrt(static_cast<double>(HQ));
  for (std::size_t t = 0; t < T; ++t) {
    const std::size_t n_pos = first + t + 1;  // causal: positions 0 … pos0+t
    double* score = b.scores.data();
    for (std::size_t h = 0; h < MH; ++h) {
      const float* qh = q + (t * MH + h) * HQ;
      const Matrix kb = w.kv_b_proj.rows_slice(h * (NOPE + HV), NOPE);
      const Matrix vb = w.kv_b_proj.rows_slice(h * (NOPE + HV) + NOPE, HV);
      transposed_matvec(kb, qh, qlat, b.acc.data());
      for (std::size_t p = 0; p < n_pos; ++p) {
        const float* lat = cache.latent.data() + p * LAT;
        score[p] = (ops.dot(qlat, lat, KVL) + ops.dot(qh + NOPE, lat + KVL, ROPE)) * scale;
      }
      softmax64({score, n_pos});
      for (std::size_t j = 0; j < KVL; ++j) {
        double acc = 0;
        for (std::size_t p = 0; p < n_pos; ++p) acc += score[p] * double{cache.latent[p * LAT + j]};
        cbar[j] = static_cast<float>(acc);
      }
      float* yh = y + (t * MH + h) * HV;
      ops.matmul(vb, cbar, 1, yh);
      for (std::size_t j = 0; j < HV; ++j)
        yh[j] = static_cast<float>(double{yh[j]} * sigmoid64(gate[(t * MH + h) * HV + j]));
    }
  }
}

}  // namespace

void mla(const Ops& ops, const ModelConfig& c, const MlaWeights& w, std::size_t layer, std::span<const SeqSlice> slices,
         const float* x, std::size_t T, float* out, MlaBuffers& b) {
  const auto QL = static_cast<std::size_t>(c.q_lora_rank);
  constexpr double kMlaEps = 1e-6;
  // Projections for the whole chunk (rows independent: batch == single bit for bit).
  float* ql = b.ql.data();
  ops.matmul(w.q_a_proj, x, T, ql);
  for (std::size_t t = 0; t < T; ++t) ops.rmsnorm(ql + t * QL, w.q_a_layernorm.data(), kMlaEps, QL, ql + t * QL);
  ops.matmul(w.q_b_proj, ql, T, b.q.data());
  ops.matmul(w.kv_a_proj_with_mqa, x, T, b.ckv.data());
  ops.matmul(w.g_proj, x, T, b.gate.data());
  // The attention, sequence by sequence, each over its own cache.
  for (const SeqSlice& s : slices) mla_attend(ops, c, w, s.state->mla[layer], s.state->position, s.first, s.rows, b);
  ops.matmul(w.o_proj, b.y.data(), T, out);
}

}  // namespace k3::maths
