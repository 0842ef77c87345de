// The run buffers: what the forward pass works in, one named buffer per use, grouped by
// block. Sized by the memory plan (k3/plan.hpp RunBufferSizes) and allocated once when a
// session starts, so the per-token path allocates nothing. A block reads and writes only
// its own group; a group is valid until its block returns (blocks run one after another).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include <k3/plan.hpp>

namespace k3::maths {

struct StackBuffers {
  std::vector<float> prefix, h, normed, out;  ///< [chunk, E]: P, h, RMSNorm(h), block output
  std::vector<float> bank;                    ///< [blocks, chunk, E] AttnRes snapshots
  std::vector<const float*> bank_rows;        ///< one token's rows of an aggregation
};

struct AttnResBuffers {
  std::vector<double> fold, scores;
};

struct KdaBuffers {
  std::vector<float> q, k, v, z, g, y, fa, b, u;
  std::vector<double> alpha, bk;
};

struct MlaBuffers {
  std::vector<float> ql, q, ckv, gate, y, qlat, cbar;
  std::vector<double> scores, acc;
};

struct MoeBuffers {
  std::vector<float> logits, z, r, shared_gate, shared_up, shared_out, contrib, gather, h1, h3, expert_out;
  std::vector<double> weights, choice;
  /// Routing: ids [chunk·top_k]; users = the (t·top_k + j) request slots grouped by expert
  /// (ascending id, then slot order); user_start [experts + 2] bounds them per expert;
  /// unique = the distinct experts of the chunk, ascending.
  std::vector<std::uint32_t> ids, users, user_start, unique;
  /// Router lookahead: tokens per expert [experts], the predicted experts [experts],
  /// one token's top-k [top_k]; summed selection scores per expert [experts].
  std::vector<std::uint32_t> ahead_count, ahead_ids, ahead_topk;
  std::vector<double> ahead_score;
};

struct DenseBuffers {
  std::vector<float> g, u;
};

class RunBuffers {
 public:
  RunBuffers() = default;
  explicit RunBuffers(const RunBufferSizes& sizes) : sizes_(sizes) {
    auto f = [](std::vector<float>& v, std::uint64_t n) { v.assign(n, 0.0f); };
    auto d = [](std::vector<double>& v, std::uint64_t n) { v.assign(n, 0.0); };
    auto u = [](std::vector<std::uint32_t>& v, std::uint64_t n) { v.assign(n, 0u); };
    // Every buffer, grouped by block, several a line: kept as written.
    // clang-format off
    const auto& s = sizes.stack;
    f(stack.prefix, s.prefix); f(stack.h, s.h); f(stack.normed, s.normed); f(stack.out, s.out);
    f(stack.bank, s.bank);
    stack.bank_rows.reserve(s.bank_rows);
    d(attn_res.fold, sizes.attn_res.fold); d(attn_res.scores, sizes.attn_res.scores);
    const auto& k = sizes.kda;
    f(kda.q, k.q); f(kda.k, k.k); f(kda.v, k.v); f(kda.z, k.z); f(kda.g, k.g); f(kda.y, k.y);
    f(kda.fa, k.fa); f(kda.b, k.b); f(kda.u, k.u); d(kda.alpha, k.alpha); d(kda.bk, k.bk);
    const auto& m = sizes.mla;
    f(mla.ql, m.ql); f(mla.q, m.q); f(mla.ckv, m.ckv); f(mla.gate, m.gate); f(mla.y, m.y);
    f(mla.qlat, m.qlat); f(mla.cbar, m.cbar); d(mla.scores, m.scores); d(mla.acc, m.acc);
    const auto& e = sizes.moe;
    f(moe.logits, e.logits); f(moe.z, e.z); f(moe.r, e.r); f(moe.shared_gate, e.shared_gate);
    f(moe.shared_up, e.shared_up); f(moe.shared_out, e.shared_out); f(moe.contrib, e.contrib);
    f(moe.gather, e.gather); f(moe.h1, e.h1); f(moe.h3, e.h3); f(moe.expert_out, e.expert_out);
    d(moe.weights, e.weights); d(moe.choice, e.choice);
    u(moe.ids, e.ids); u(moe.users, e.users); u(moe.user_start, e.user_start); u(moe.unique, e.unique);
    u(moe.ahead_count, e.ahead_count); u(moe.ahead_ids, e.ahead_ids); u(moe.ahead_topk, e.ahead_topk);
    d(moe.ahead_score, e.ahead_score);
    f(dense.g, sizes.dense.g); f(dense.u, sizes.dense.u);
    // clang-format on
  }

  [[nodiscard]] const RunBufferSizes& sizes() const noexcept { return sizes_; }

  StackBuffers stack;
  AttnResBuffers attn_res;
  KdaBuffers kda;
  MlaBuffers mla;
  MoeBuffers moe;
  DenseBuffers dense;

 private:
  RunBufferSizes sizes_;
};

}  // namespace k3::maths
