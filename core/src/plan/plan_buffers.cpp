// The run buffers of the plan (k3/plan.hpp RunBufferSizes): what each block of the forward
// pass works in for a chunk of T tokens. maths/run_buffers.hpp allocates exactly these, so
// the plan's buffer figure is what a session holds.
#include <k3/plan.hpp>

#include <algorithm>

namespace k3 {
namespace {

using U = std::uint64_t;

}  // namespace

RunBufferSizes run_buffer_sizes(const ModelConfig& c, std::int64_t chunk, std::int64_t positions, std::int64_t lanes) {
  RunBufferSizes b;
  const U N = static_cast<U>(std::max<std::int64_t>(1, lanes));
  const U T = static_cast<U>(std::max<std::int64_t>(1, chunk));
  b.chunk = T;
  b.positions = static_cast<U>(std::max<std::int64_t>(1, positions));
  const U E = static_cast<U>(c.hidden_size);
  const U layers = static_cast<U>(c.num_hidden_layers);
  const U B = static_cast<U>(std::max<std::int64_t>(1, c.attn_res_block_size));
  const U blocks = (layers + B - 1) / B;  // a snapshot at every layer i with i % B == 0

  b.stack.prefix = b.stack.h = b.stack.normed = b.stack.out = T * E;
  b.stack.bank = blocks * T * E;
  b.stack.bank_rows = blocks + 1;
  b.attn_res.fold = E;
  b.attn_res.scores = blocks + 1;

  const U H = static_cast<U>(c.kda_num_heads), D = static_cast<U>(c.kda_head_dim), P = H * D;
  b.kda.q = b.kda.k = b.kda.v = b.kda.z = b.kda.g = b.kda.y = T * P;
  b.kda.fa = T * D;
  b.kda.b = T * H;
  b.kda.u = b.kda.alpha = b.kda.bk = N * D;

  const U MH = static_cast<U>(c.num_attention_heads), KVL = static_cast<U>(c.kv_lora_rank);
  const U HQ = static_cast<U>(c.qk_nope_head_dim + c.qk_rope_head_dim), HV = static_cast<U>(c.v_head_dim);
  b.mla.ql = T * static_cast<U>(c.q_lora_rank);
  b.mla.q = T * MH * HQ;
  b.mla.ckv = T * (KVL + static_cast<U>(c.qk_rope_head_dim));
  b.mla.gate = b.mla.y = T * MH * HV;
  b.mla.qlat = b.mla.cbar = N * KVL;
  b.mla.scores = N * b.positions;
  b.mla.acc = N * 8 * KVL;

  const U NE = static_cast<U>(c.num_experts), K = static_cast<U>(c.num_experts_per_token);
  const U I = static_cast<U>(c.moe_intermediate_size), L = static_cast<U>(c.routed_expert_hidden_size);
  const U SI = I * static_cast<U>(c.num_shared_experts);
  b.moe.logits = T * NE;
  b.moe.z = b.moe.r = T * L;
  b.moe.shared_gate = b.moe.shared_up = T * SI;
  b.moe.shared_out = T * E;
  b.moe.contrib = T * K * L;
  // A token chooses an expert at most once, so one expert serves at most T rows.
  b.moe.gather = b.moe.expert_out = T * L;
  b.moe.h1 = b.moe.h3 = T * I;
  b.moe.weights = T * K;
  b.moe.choice = NE;
  b.moe.ids = b.moe.users = T * K;
  b.moe.user_start = NE + 2;  // a counting sort's boundaries
  b.moe.unique = std::min(T * K, NE);
  b.moe.ahead_count = b.moe.ahead_ids = b.moe.ahead_score = NE;
  b.moe.ahead_topk = K;

  const U DI = static_cast<U>(c.intermediate_size);
  b.dense.g = b.dense.u = T * DI;
  return b;
}

std::uint64_t RunBufferSizes::bytes() const {
  const auto& s = stack;
  const std::uint64_t floats = s.prefix + s.h + s.normed + s.out + s.bank +                              //
                               kda.q + kda.k + kda.v + kda.z + kda.g + kda.y + kda.fa + kda.b + kda.u +  //
                               mla.ql + mla.q + mla.ckv + mla.gate + mla.y + mla.qlat + mla.cbar +       //
                               moe.logits + moe.z + moe.r + moe.shared_gate + moe.shared_up + moe.shared_out +
                               moe.contrib + moe.gather + moe.h1 + moe.h3 + moe.expert_out +  //
                               dense.g + dense.u;
  const std::uint64_t doubles = attn_res.fold + attn_res.scores + kda.alpha + kda.bk + mla.scores + mla.acc +
                                moe.weights + moe.choice + moe.ahead_score;
  const std::uint64_t u32 = moe.ids + moe.users + moe.user_start + moe.unique + moe.ahead_count + moe.ahead_ids +
                            moe.ahead_topk;
  return floats * 4 + doubles * 8 + u32 * 4 + s.bank_rows * sizeof(const float*);
}

}  // namespace k3
