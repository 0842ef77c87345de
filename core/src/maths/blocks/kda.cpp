// Kimi Delta Attention (docs/model-spec.md §3 "KDA"), per token, channel c = h·D + d:
//  1. q̃,k̃,ṽ = W_q x, W_k x, W_v x; causal depthwise conv of width K (tap K-1 = current
//     token, zero history at sequence start), then SiLU.
//  2. q, k: per head x / sqrt(Σx² + 1e-6); then q ·= D^-1/2. v untouched.
//  3. g = lb · σ( exp(A_log[h]) · (W_fb(W_fa x)[c] + dt_bias[c]) ); α = exp(g).
//  4. β_h = σ((W_b x)[h]).
//  5. S ← diag(α) S;  u = v − Sᵀk;  S ← S + β·k uᵀ;  o = Sᵀ q.   (order is load-bearing)
//  6. y_h = RMSNorm(o_h; o_norm) ⊙ σ((W_g x)_h)  (norm first, then gate); out = W_o y.
// S is stored transposed (row j = column j of S) so that Sᵀk and Sᵀq are contiguous dots.
#include <algorithm>
#include <cmath>

#include "maths/blocks/blocks.hpp"
#include "maths/parallel_items.hpp"

namespace k3::maths {
namespace {

/// Appends channel inputs x[P] to the conv history [P][K-1] (oldest first), dropping the oldest.
void push_history(float* history, const float* x, std::size_t P, std::size_t K) {
  if (K < 2) return;
  for (std::size_t c = 0; c < P; ++c) {
    float* h = history + c * (K - 1);
    for (std::size_t t = 0; t + 2 < K; ++t) h[t] = h[t + 1];
    h[K - 2] = x[c];
  }
}

/// Causal depthwise conv for one token and all P channels, then SiLU; shifts the history.
/// history [P][K-1] oldest first. Sum in tap order (oldest … current) in fp64. When
/// `raw` is given it receives the inputs (what the history took).
void short_conv_silu(const float* taps, float* history, std::size_t P, std::size_t K, float* x, float* raw) {
  for (std::size_t c = 0; c < P; ++c) {
    const float* w = taps + c * K;
    float* h = history + c * (K - 1);
    double acc = 0;
    for (std::size_t t = 0; t + 1 < K; ++t) acc += double{w[t]} * double{h[t]};
    acc += double{w[K - 1]} * double{x[c]};
    for (std::size_t t = 0; t + 2 < K; ++t) h[t] = h[t + 1];
    if (K > 1) h[K - 2] = x[c];
    if (raw != nullptr) raw[c] = x[c];
    const float y = static_cast<float>(acc);
    x[c] = silu(y);
  }
}

/// S ← diag(α) S for one head (S stored transposed: row j holds column j).
void decay(float* S, const double* al, std::size_t D) {
  for (std::size_t j = 0; j < D; ++j) {
    float* row = S + j * D;
    for (std::size_t i = 0; i < D; ++i) row[i] = static_cast<float>(double{row[i]} * al[i]);
  }
}

/// S ← S + β·k uᵀ for one head; bk = β·k in fp64.
void add_outer(float* S, double beta, const float* k, const float* u, double* bk, std::size_t D) {
  for (std::size_t i = 0; i < D; ++i) bk[i] = beta * double{k[i]};
  for (std::size_t j = 0; j < D; ++j) {
    float* row = S + j * D;
    const double uj = u[j];
    for (std::size_t i = 0; i < D; ++i) row[i] = static_cast<float>(double{row[i]} + bk[i] * uj);
  }
}

/// Per-head L2 normalisation x / sqrt(Σx² + 1e-6), times `scale`, rounded once.
void l2norm_heads(const Ops& ops, float* x, std::size_t H, std::size_t D, double scale) {
  for (std::size_t h = 0; h < H; ++h) {
    float* v = x + h * D;
    const double inv = scale / std::sqrt(ops.dot(v, v, D) + 1e-6);
    for (std::size_t d = 0; d < D; ++d) v[d] = static_cast<float>(double{v[d]} * inv);
  }
}

}  // namespace

namespace {

/// A tentative slice runs on a scratch copy of its live state (which stays as it is), with
/// its journal sized for the slice. Before any head of the slice runs.
void begin_recurrence(const ModelConfig& c, KdaState& live, const KdaRecord& record, std::size_t T) {
  KdaJournal* journal = record.journal;
  if (journal == nullptr) return;
  const std::size_t H = static_cast<std::size_t>(c.kda_num_heads);
  const std::size_t P = H * static_cast<std::size_t>(c.kda_head_dim);
  record.scratch->S = live.S;
  record.scratch->conv_q = live.conv_q;
  record.scratch->conv_k = live.conv_k;
  record.scratch->conv_v = live.conv_v;
  journal->tokens = T;
  for (auto* v : {&journal->raw_q, &journal->raw_k, &journal->raw_v, &journal->k, &journal->u})
    if (v->size() < T * P) v->resize(T * P);
  if (journal->alpha.size() < T * P) journal->alpha.resize(T * P);
  if (journal->beta.size() < T * H) journal->beta.resize(T * H);
}

/// Where one lane's scratch is: u [D] floats, alpha and bk [D] doubles each.
struct KdaLane {
  float* u;
  double* alpha;
  double* bk;
};

/// The recurrence of head h of one slice (the tokens of one sequence, in order) over its rows
/// of the projections q, k, v, z, braw, graw (the whole chunk's), writing its rows of y. A
/// head's channels h·D … h·D+D-1 depend on no other head's, so heads run in any order, on
/// any thread, with the same bits as all heads token by token.
void kda_head(const Ops& ops, const ModelConfig& c, const KdaWeights& w, KdaState& st, KdaJournal* journal,
              std::size_t first, std::size_t T, std::size_t h, KdaBuffers& b, KdaLane lane) {
  const auto H = static_cast<std::size_t>(c.kda_num_heads);
  const auto D = static_cast<std::size_t>(c.kda_head_dim);
  const auto K = static_cast<std::size_t>(c.short_conv_kernel_size);
  const std::size_t P = H * D;
  const std::size_t c0 = h * D;  // the head's first channel
  auto rec = [&](std::vector<float> KdaJournal::*field, std::size_t t) -> float* {
    return journal != nullptr ? (journal->*field).data() + t * P + c0 : nullptr;
  };

  // This slice's rows of the chunk's projections.
  float* q = b.q.data() + first * P;
  float* k = b.k.data() + first * P;
  float* v = b.v.data() + first * P;
  const float* z = b.z.data() + first * P;
  const float* braw = b.b.data() + first * H;
  const float* graw = b.g.data() + first * P;
  float* y = b.y.data() + first * P;
  const double q_scale = 1.0 / std::sqrt(static_cast<double>(D));
  const double lb = c.gate_lower_bound;
  const double a = std::exp(double{w.A_log[h]});
  float* S = st.S.data() + h * D * D;  // S[j*D + i] = S_math[i][j]
  const auto conv = [&](const F32Vector& taps, std::vector<float>& history, float* x, float* raw) {
    short_conv_silu(taps.data() + c0 * K, history.data() + c0 * (K - 1), D, K, x + c0, raw);
  };

  for (std::size_t t = 0; t < T; ++t) {  // the recurrence walks tokens in order
    float* qh = q + t * P + c0;
    float* kh = k + t * P + c0;
    conv(w.q_conv, st.conv_q, q + t * P, rec(&KdaJournal::raw_q, t));
    conv(w.k_conv, st.conv_k, k + t * P, rec(&KdaJournal::raw_k, t));
    conv(w.v_conv, st.conv_v, v + t * P, rec(&KdaJournal::raw_v, t));
    l2norm_heads(ops, qh, 1, D, q_scale);
    l2norm_heads(ops, kh, 1, D, 1.0);

    double* alpha = journal ? journal->alpha.data() + t * P + c0 : lane.alpha;
    for (std::size_t d = 0; d < D; ++d) {
      const std::size_t ch = c0 + d;
      const double g = lb * sigmoid64(a * (double{z[t * P + ch]} + double{w.dt_bias[ch]}));
      alpha[d] = std::exp(g);
    }

    const double beta = sigmoid64(braw[t * H + h]);
    const float* vh = v + t * P + c0;
    float* uh = journal ? journal->u.data() + t * P + c0 : lane.u;
    decay(S, alpha, D);
    for (std::size_t j = 0; j < D; ++j)  // u = v − Sᵀk
      uh[j] = static_cast<float>(double{vh[j]} - ops.dot(S + j * D, kh, D));
    add_outer(S, beta, kh, uh, lane.bk, D);
    if (journal != nullptr) {
      journal->beta[t * H + h] = beta;
      std::copy_n(kh, D, journal->k.data() + t * P + c0);
    }
    float* yh = y + t * P + c0;
    for (std::size_t j = 0; j < D; ++j) yh[j] = static_cast<float>(ops.dot(S + j * D, qh, D));  // o = Sᵀq
    ops.rmsnorm(yh, w.o_norm.data(), c.rms_norm_eps, D, yh);
    for (std::size_t j = 0; j < D; ++j) yh[j] = static_cast<float>(double{yh[j]} * sigmoid64(graw[t * P + c0 + j]));
  }
}

}  // namespace

void kda(const Ops& ops, const ModelConfig& c, const KdaWeights& w, std::size_t layer, std::span<const SeqSlice> slices,
         const float* x, std::size_t T, float* out, KdaBuffers& b) {
  // Projections for the whole chunk, every slice's rows in one product each (rows
  // independent: batch == single bit for bit).
  ops.matmul(w.q_proj, x, T, b.q.data());
  ops.matmul(w.k_proj, x, T, b.k.data());
  ops.matmul(w.v_proj, x, T, b.v.data());
  ops.matmul(w.f_a_proj, x, T, b.fa.data());
  ops.matmul(w.f_b_proj, b.fa.data(), T, b.z.data());
  ops.matmul(w.b_proj, x, T, b.b.data());
  ops.matmul(w.g_proj, x, T, b.g.data());
  // The recurrence, sequence by sequence, each on its own state; every (slice, head) is an
  // item of its own, over the threads when there is enough of them (parallel_items.hpp).
  const auto H = static_cast<std::size_t>(c.kda_num_heads);
  const auto D = static_cast<std::size_t>(c.kda_head_dim);
  for (const SeqSlice& s : slices) {
    TentativeChunk* tc = s.tentative;
    const KdaRecord record = tc != nullptr ? KdaRecord{&tc->kda[layer], &tc->scratch} : KdaRecord{};
    begin_recurrence(c, s.state->kda[layer], record, s.rows);
  }
  const std::size_t items = slices.size() * H;
  const std::size_t lanes = b.u.size() / D;  // one scratch per thread (run_buffer_sizes)
  const int threads = std::min(ops.threads_for(items, T * H * 4 * D * D), static_cast<int>(lanes));
  for_items(items, threads, [&](std::size_t item, std::size_t l) {
    const SeqSlice& s = slices[item / H];
    TentativeChunk* tc = s.tentative;  // runs on its scratch copy (begin_recurrence)
    KdaState& st = tc != nullptr ? tc->scratch : s.state->kda[layer];
    KdaJournal* journal = tc != nullptr ? &tc->kda[layer] : nullptr;
    const KdaLane lane{b.u.data() + l * D, b.alpha.data() + l * D, b.bk.data() + l * D};
    kda_head(ops, c, w, st, journal, s.first, s.rows, item % H, b, lane);
  });
  ops.matmul(w.o_proj, b.y.data(), T, out);
}

void kda_keep(const ModelConfig& c, const KdaJournal& journal, std::size_t keep, KdaState& st, KdaBuffers& b) {
  const auto H = static_cast<std::size_t>(c.kda_num_heads);
  const auto D = static_cast<std::size_t>(c.kda_head_dim);
  const auto K = static_cast<std::size_t>(c.short_conv_kernel_size);
  const std::size_t P = H * D;
  for (std::size_t t = 0; t < keep; ++t) {  // the same updates, in the same order, as kda()
    push_history(st.conv_q.data(), journal.raw_q.data() + t * P, P, K);
    push_history(st.conv_k.data(), journal.raw_k.data() + t * P, P, K);
    push_history(st.conv_v.data(), journal.raw_v.data() + t * P, P, K);
    for (std::size_t h = 0; h < H; ++h) {
      float* S = st.S.data() + h * D * D;
      decay(S, journal.alpha.data() + t * P + h * D, D);
      add_outer(S, journal.beta[t * H + h], journal.k.data() + t * P + h * D, journal.u.data() + t * P + h * D,
                b.bk.data(), D);
    }
  }
}

}  // namespace k3::maths
