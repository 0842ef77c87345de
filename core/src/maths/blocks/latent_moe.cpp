// Router + Stable LatentMoE (docs/model-spec.md §3 "Router + Stable LatentMoE"), per token x:
//  1. s = σ(W_gate x) in fp32; top-k of s + bias (ties: lower expert id first);
//     w_j = s[idx_j] (unbiased), renormalised w/(Σw + 1e-20) when top-k > 1 (the official gate), times
//     routed_scaling_factor.
//  2. z = W_down x; E_e(z) = W2_e · SiTU(W1_e z, W3_e z); r = Σ_j w_j E_{idx_j}(z).
//  3. r = RMSNorm(r; routed_expert_norm); y = W_up r + Shared(x),
//     Shared(x) = W_sd · SiTU(W_sg x, W_su x), unweighted.
// Chunked: each expert chosen in the chunk is multiplied once for all the tokens that chose
// it, whichever sequences they belong to (a batched matmul equals the per-token result bit
// for bit); each token then sums its experts in top-k order, so neither chunking nor
// batching ever changes a bit. The routed-expert reads start
// right after routing and overlap the shared expert (docs/streaming.md "Overlap").
#include <algorithm>
#include <span>

#include "maths/blocks/blocks.hpp"
#include "maths/router_copy.hpp"

namespace k3::maths {
namespace {

/// Top-k of choice (descending; ties → lower id first) into idx[0..k).
void top_k(const double* choice, std::size_t n, std::size_t k, std::uint32_t* idx) {
  for (std::size_t j = 0; j < k; ++j) {
    std::size_t best = n;
    for (std::size_t e = 0; e < n; ++e) {
      bool taken = false;
      for (std::size_t i = 0; i < j; ++i) taken = taken || idx[i] == e;
      if (taken) continue;
      if (best == n || choice[e] > choice[best]) best = e;
    }
    idx[j] = static_cast<std::uint32_t>(best);
  }
}

}  // namespace

// Likeliest first: chosen by more tokens, then by a higher summed selection score (so a
// byte limit keeps the router's most confident guesses). Uses only the lookahead's own
// buffers and logits/choice, which latent_moe's routing is done with (and a dense layer
// does not use): nothing the output depends on.
void predict_ahead(const Ops& ops, const ModelConfig& c, std::size_t layer, const LookaheadRouter& ahead,
                   ExpertSource& experts, const float* x, std::size_t T, MoeBuffers& b) {
  const auto NE = static_cast<std::size_t>(c.num_experts);
  const auto K = static_cast<std::size_t>(c.num_experts_per_token);
  float* logits = b.logits.data();
  double* choice = b.choice.data();
  std::uint32_t* count = b.ahead_count.data();
  std::uint32_t* topk = b.ahead_topk.data();
  std::uint32_t* ids = b.ahead_ids.data();
  double* score = b.ahead_score.data();
  const float* bias = nullptr;
  if (ahead.moe != nullptr) {
    ops.matmul(ahead.moe->gate, x, T, logits);
    bias = ahead.moe->bias.data();
  } else {
    ahead.copy->logits(x, T, logits);
    bias = ahead.copy->bias();
  }
  std::fill_n(count, NE, 0u);
  std::fill_n(score, NE, 0.0);
  for (std::size_t t = 0; t < T; ++t) {
    const float* lt = logits + t * NE;
    for (std::size_t e = 0; e < NE; ++e) choice[e] = double{sigmoid(lt[e])} + double{bias[e]};
    top_k(choice, NE, K, topk);
    for (std::size_t j = 0; j < K; ++j) {
      ++count[topk[j]];
      score[topk[j]] += choice[topk[j]];
    }
  }
  std::size_t n = 0;
  for (std::size_t e = 0; e < NE; ++e)
    if (count[e] != 0) ids[n++] = static_cast<std::uint32_t>(e);
  // Insertion sort (a decode step has top-k ids; std::stable_sort may allocate); equal
  // keys keep the lower id first.
  const auto before = [&](std::uint32_t a, std::uint32_t b2) {
    return count[a] != count[b2] ? count[a] > count[b2] : score[a] > score[b2];
  };
  for (std::size_t i = 1; i < n; ++i)
    for (std::size_t j = i; j > 0 && before(ids[j], ids[j - 1]); --j) std::swap(ids[j], ids[j - 1]);
  experts.prefetch(layer, ahead.layer, {ids, n}, T);
}

void latent_moe(const Ops& ops, const ModelConfig& c, std::size_t layer, const MoeWeights& w, ExpertSource& experts,
                RoutingObserver* observer, std::span<const SeqSlice> slices, const float* x, std::size_t T, float* out,
                MoeBuffers& b, std::span<const LookaheadRouter> ahead) {
  const auto E = static_cast<std::size_t>(c.hidden_size);
  const auto NE = static_cast<std::size_t>(c.num_experts);
  const auto K = static_cast<std::size_t>(c.num_experts_per_token);
  const auto I = static_cast<std::size_t>(c.moe_intermediate_size);
  const auto L = static_cast<std::size_t>(c.routed_expert_hidden_size);
  const std::size_t SI = I * static_cast<std::size_t>(c.num_shared_experts);
  const double b1 = c.activation_situ_beta, b2 = c.activation_situ_linear_beta;

  // 1. Route every token of the chunk.
  float* logits = b.logits.data();
  ops.matmul(w.gate, x, T, logits);
  std::uint32_t* ids = b.ids.data();
  double* weights = b.weights.data();
  double* choice = b.choice.data();
  if (observer != nullptr) observer->on_group(layer, T);
  std::size_t slice = 0;  // the slice of row t (slices cover the rows in order)
  for (std::size_t t = 0; t < T; ++t) {
    const float* lt = logits + t * NE;
    for (std::size_t e = 0; e < NE; ++e) choice[e] = double{sigmoid(lt[e])} + double{w.bias[e]};
    std::uint32_t* it = ids + t * K;
    top_k(choice, NE, K, it);
    double* wt = weights + t * K;
    double sum = 0;
    for (std::size_t j = 0; j < K; ++j) {
      wt[j] = sigmoid(lt[it[j]]);  // the unbiased score, fp32
      sum += wt[j];
    }
    for (std::size_t j = 0; j < K; ++j) {
      if (c.moe_renormalize && K > 1) wt[j] = wt[j] / (sum + 1e-20);
      wt[j] *= c.routed_scaling_factor;
    }
    if (observer != nullptr) {
      while (slice + 1 < slices.size() && t >= slices[slice].first + slices[slice].rows) ++slice;
      const SeqSlice& s = slices[slice];
      if (t == s.first) observer->on_slice(slice);
      observer->on_route(s.state->position + static_cast<std::int64_t>(t - s.first), layer, {it, K});
    }
  }

  // 2. Latent down-projection, then each chosen expert once for all its tokens.
  float* z = b.z.data();
  ops.matmul(w.down, x, T, z);
  // Each chosen expert's request slots (t·K + j), experts ascending and slots in order, by a
  // counting sort in the run buffers: users[start[e] … start[e+1]) are expert e's.
  std::uint32_t* start = b.user_start.data();  // [NE + 2]
  std::uint32_t* users = b.users.data();
  std::uint32_t* unique = b.unique.data();
  std::fill_n(start, NE + 2, 0u);
  for (std::size_t i = 0; i < T * K; ++i) ++start[ids[i] + 2];
  for (std::size_t e = 0; e < NE; ++e) start[e + 2] += start[e + 1];  // start[e+1] = first slot of e
  for (std::size_t i = 0; i < T * K; ++i) users[start[ids[i] + 1]++] = static_cast<std::uint32_t>(i);
  std::size_t n_unique = 0;
  for (std::size_t e = 0; e < NE; ++e)
    if (start[e + 1] > start[e]) unique[n_unique++] = static_cast<std::uint32_t>(e);
  experts.route(layer, {ids, T * K});

  // Reads start now; the shared expert (which needs no routed weights) is computed while
  // they are in flight. Batches of at most max_batch() distinct experts keep every expert
  // of a batch leased at once; the order of experts never changes a bit (each writes its
  // own contribution rows).
  const std::size_t per_batch = std::max<std::size_t>(1, std::min(experts.max_batch(), n_unique));
  const std::span<const std::uint32_t> all_ids(unique, n_unique);
  if (n_unique != 0) experts.request(layer, all_ids.first(std::min(per_batch, n_unique)));
  // The next layers' likely experts, queued behind this layer's reads (docs/cache.md
  // "Router-lookahead prefetch").
  for (const LookaheadRouter& a : ahead) predict_ahead(ops, c, layer, a, experts, x, T, b);

  // Shared experts on the original x, unweighted (added at the end).
  float* sg = b.shared_gate.data();
  float* su = b.shared_up.data();
  ops.matmul(w.shared_gate, x, T, sg);
  ops.matmul(w.shared_up, x, T, su);
  for (std::size_t i = 0; i < T * SI; ++i) sg[i] = situ(sg[i], su[i], b1, b2);
  float* sh = b.shared_out.data();
  ops.matmul(w.shared_down, sg, T, sh);

  float* contrib = b.contrib.data();  // [t·K + j][L]
  float* zg = b.gather.data();
  float* h1 = b.h1.data();
  float* h3 = b.h3.data();
  float* eo = b.expert_out.data();
  for (std::size_t first = 0; first < n_unique; first += per_batch) {
    const std::size_t count = std::min(per_batch, n_unique - first);
    if (first != 0) experts.request(layer, all_ids.subspan(first, count));
    for (std::size_t u = 0; u < count; ++u) {
      const ExpertWeights ew = experts.wait_one(layer, u);  // later experts are still being read
      const std::uint32_t e = unique[first + u];
      const std::uint32_t* slots = users + start[e];
      const std::size_t n = start[e + 1] - start[e];  // at most T: a token chooses an expert once
      if (ew.w1.packed == nullptr) {                  // failed to load: zero contribution (ids unsound)
        for (std::size_t r = 0; r < n; ++r) std::fill_n(contrib + slots[r] * L, L, 0.0f);
        continue;
      }
      for (std::size_t r = 0; r < n; ++r) std::copy_n(z + (slots[r] / K) * L, L, zg + r * L);
      ops.matmul(ew.w1, zg, n, h1);
      ops.matmul(ew.w3, zg, n, h3);
      for (std::size_t i = 0; i < n * I; ++i) h1[i] = situ(h1[i], h3[i], b1, b2);
      ops.matmul(ew.w2, h1, n, eo);
      for (std::size_t r = 0; r < n; ++r) std::copy_n(eo + r * L, L, contrib + slots[r] * L);
    }
    experts.release(layer);
  }

  // 3. Per token: weighted sum in top-k order (fp64, rounded once), latent norm, up-projection.
  float* r = b.r.data();
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t l = 0; l < L; ++l) {
      double acc = 0;
      for (std::size_t j = 0; j < K; ++j) acc += weights[t * K + j] * double{contrib[(t * K + j) * L + l]};
      r[t * L + l] = static_cast<float>(acc);
    }
    if (c.latent_moe_use_norm) ops.rmsnorm(r + t * L, w.latent_norm.data(), c.rms_norm_eps, L, r + t * L);
  }
  ops.matmul(w.up, r, T, out);

  for (std::size_t i = 0; i < T * E; ++i) out[i] = static_cast<float>(double{out[i]} + double{sh[i]});
}

}  // namespace k3::maths
