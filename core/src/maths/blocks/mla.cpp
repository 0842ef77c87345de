// Gated MLA without RoPE (docs/model-spec.md §3 "MLA"), per token:
//  1. q = W_qb · RMSNorm(W_qa x; q_a_layernorm, 1e-6) → per head [q_nope | q_r].
//  2. [c | k_r] = W_kva x; c = RMSNorm(c; kv_a_layernorm, 1e-6); k_r not normed, not rotated.
//  3. per head: k = [W_kb,h c | k_r], v = W_vb,h c; score = q·k / sqrt(nope + rope);
//     causal softmax; o_h = Σ p·v.
//  4. out = W_o ( concat_h o_h ⊙ σ(W_g x) ).
// Latent form (the cache holds only [c | k_r] per position): q_nope·(W_kb,h c) is computed
// as (W_kb,hᵀ q_nope)·c and Σ_s p_s (W_vb,h c_s) as W_vb,h (Σ_s p_s c_s). W_kb,hᵀ q_nope
// uses the contract's 8-way fp64 partition over the nope index.
#include <algorithm>
#include <cmath>

#include "maths/blocks/blocks.hpp"
#include "maths/parallel_items.hpp"

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

/// Appends [normed c | k_r] of every token of a slice (its rows of ckv, from row0) to its
/// cache, before any head attends: token t then sees positions 0 … pos0+t.
void extend_cache(const Ops& ops, const ModelConfig& c, const MlaWeights& w, MlaCache& cache, std::int64_t pos0,
                  std::size_t row0, std::size_t T, const MlaBuffers& b) {
  const auto KVL = static_cast<std::size_t>(c.kv_lora_rank);
  const auto ROPE = static_cast<std::size_t>(c.qk_rope_head_dim);
  const std::size_t LAT = KVL + ROPE;
  constexpr double kMlaEps = 1e-6;  // the two MLA-internal norms (docs/model-spec.md §1)
  const float* ckv = b.ckv.data() + row0 * LAT;
  const auto first = static_cast<std::size_t>(pos0);
  cache.latent.resize((first + T) * LAT);
  for (std::size_t t = 0; t < T; ++t) {
    float* dst = cache.latent.data() + (first + t) * LAT;
    ops.rmsnorm(ckv + t * LAT, w.kv_a_layernorm.data(), kMlaEps, KVL, dst);
    for (std::size_t r = 0; r < ROPE; ++r) dst[KVL + r] = ckv[t * LAT + KVL + r];
  }
}

/// One thread's scratch: qlat and cbar [kv_lora], scores [positions], acc [8·kv_lora].
struct MlaLane {
  float* qlat;
  float* cbar;
  double* scores;
  double* acc;
};

/// Head h's attention for one slice (one sequence's tokens, in order) over its extended
/// cache; reads its rows of q and gate, writes its rows of y. Heads share nothing but the
/// cache they read, so they run in any order, on any thread, with the same bits.
void attend_head(const Ops& ops, const ModelConfig& c, const MlaWeights& w, const MlaCache& cache, std::int64_t pos0,
                 std::size_t row0, std::size_t T, std::size_t h, MlaBuffers& b, MlaLane lane) {
  const auto MH = static_cast<std::size_t>(c.num_attention_heads);
  const auto KVL = static_cast<std::size_t>(c.kv_lora_rank);
  const auto NOPE = static_cast<std::size_t>(c.qk_nope_head_dim);
  const auto ROPE = static_cast<std::size_t>(c.qk_rope_head_dim);
  const auto HV = static_cast<std::size_t>(c.v_head_dim);
  const std::size_t HQ = NOPE + ROPE, LAT = KVL + ROPE;
  const float* q = b.q.data() + row0 * MH * HQ;
  const float* gate = b.gate.data() + row0 * MH * HV;
  float* y = b.y.data() + row0 * MH * HV;
  const Matrix kb = w.kv_b_proj.rows_slice(h * (NOPE + HV), NOPE);
  const Matrix vb = w.kv_b_proj.rows_slice(h * (NOPE + HV) + NOPE, HV);
  const Ops one(ops.kernels(), 1, 0);  // on this item's thread only
  const double scale = 1.0 / std::sqrt(static_cast<double>(HQ));
  const auto first = static_cast<std::size_t>(pos0);
  for (std::size_t t = 0; t < T; ++t) {
    const std::size_t n_pos = first + t + 1;  // causal: positions 0 … pos0+t
    const float* qh = q + (t * MH + h) * HQ;
    double* score = lane.scores;
    transposed_matvec(kb, qh, lane.qlat, lane.acc);
    for (std::size_t p = 0; p < n_pos; ++p) {
      const float* lat = cache.latent.data() + p * LAT;
      score[p] = (ops.dot(lane.qlat, lat, KVL) + ops.dot(qh + NOPE, lat + KVL, ROPE)) * scale;
    }
    softmax64({score, n_pos});
    // cbar[j] = Σ_p score[p]·c_p[j], each j summed over p in increasing order; positions
    // outside, so each cache row is read once, front to back.
    double* sum = lane.acc;
    std::fill_n(sum, KVL, 0.0);
    for (std::size_t p = 0; p < n_pos; ++p) {
      const float* lat = cache.latent.data() + p * LAT;
      const double sp = score[p];
      for (std::size_t j = 0; j < KVL; ++j) sum[j] += sp * double{lat[j]};
    }
    for (std::size_t j = 0; j < KVL; ++j) lane.cbar[j] = static_cast<float>(sum[j]);
    float* yh = y + (t * MH + h) * HV;
    one.matmul(vb, lane.cbar, 1, yh);
    for (std::size_t j = 0; j < HV; ++j)
      yh[j] = static_cast<float>(double{yh[j]} * sigmoid64(gate[(t * MH + h) * HV + j]));
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
  // The attention, sequence by sequence, each over its own cache; every (slice, head) is an
  // item of its own, over the threads when there is enough of them (parallel_items.hpp).
  const auto MH = static_cast<std::size_t>(c.num_attention_heads);
  const auto KVL = static_cast<std::size_t>(c.kv_lora_rank);
  const std::size_t LAT = KVL + static_cast<std::size_t>(c.qk_rope_head_dim);
  const std::size_t lanes = b.qlat.size() / KVL;  // one scratch per thread (run_buffer_sizes)
  const std::size_t positions = b.scores.size() / lanes;
  std::size_t work = 0;  // per head and token: W_kb,hᵀ q, the scores, cbar, W_vb,h cbar
  for (const SeqSlice& s : slices) {
    extend_cache(ops, c, w, s.state->mla[layer], s.state->position, s.first, s.rows, b);
    const auto n_pos = static_cast<std::size_t>(s.state->position) + s.rows;
    work += s.rows * MH * (n_pos * (LAT + KVL) + KVL * static_cast<std::size_t>(c.qk_nope_head_dim + c.v_head_dim));
  }
  const int threads = std::min(ops.threads_for(slices.size() * MH, work), static_cast<int>(lanes));
  for_items(slices.size() * MH, threads, [&](std::size_t item, std::size_t l) {
    const SeqSlice& s = slices[item / MH];
    const MlaLane lane{b.qlat.data() + l * KVL, b.cbar.data() + l * KVL, b.scores.data() + l * positions,
                       b.acc.data() + l * 8 * KVL};
    attend_head(ops, c, w, s.state->mla[layer], s.state->position, s.first, s.rows, item % MH, b, lane);
  });
  ops.matmul(w.o_proj, b.y.data(), T, out);
}

}  // namespace k3::maths
