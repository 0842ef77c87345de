// Weights of the K3 text model as the maths sees them: views into buffers someone else
// loaded (streaming/layer_loader.hpp binds them). Every view names its shape and dtype.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <k3/checkpoint.hpp>
#include <k3/kernels.hpp>
#include <k3/model_config.hpp>

#include "maths/ops.hpp"

namespace k3::model {

/// Kimi Delta Attention, `self_attn.` of a KDA layer. P = H·D.
struct KdaWeights {
  Bf16Matrix q_proj, k_proj, v_proj;  ///< [P, E] bf16
  const float* q_conv = nullptr;      ///< [P, 1, K] f32 (tap K-1 = current token)
  const float* k_conv = nullptr;      ///< [P, 1, K] f32
  const float* v_conv = nullptr;      ///< [P, 1, K] f32
  Bf16Matrix f_a_proj;                ///< [D, E] bf16
  Bf16Matrix f_b_proj;                ///< [P, D] bf16
  Bf16Matrix b_proj;                  ///< [H, E] bf16
  Bf16Matrix g_proj;                  ///< [P, E] bf16
  Bf16Matrix o_proj;                  ///< [E, P] bf16
  const float* A_log = nullptr;       ///< [D] or [H] f32; only the first H are used
  const float* dt_bias = nullptr;     ///< [P] f32
  std::vector<float> o_norm;          ///< [D] (bf16 in the file), shared by all heads
};

/// Gated MLA without RoPE, `self_attn.` of an MLA layer. Hq = nope + rope, Hv = v_head_dim.
struct MlaWeights {
  Bf16Matrix q_a_proj;                ///< [q_lora, E]
  std::vector<float> q_a_layernorm;   ///< [q_lora]
  Bf16Matrix q_b_proj;                ///< [heads·Hq, q_lora]
  Bf16Matrix kv_a_proj_with_mqa;      ///< [kv_lora + rope, E]
  std::vector<float> kv_a_layernorm;  ///< [kv_lora]
  Bf16Matrix kv_b_proj;               ///< [heads·(nope + Hv), kv_lora]; per head nope k rows then Hv v rows
  Bf16Matrix g_proj;                  ///< [heads·Hv, E]
  Bf16Matrix o_proj;                  ///< [E, heads·Hv]
};

/// A bf16 matrix that is not in memory: multiplied while it is read from storage in row
/// chunks (the FFN of a split dense layer, docs/streaming.md "Split dense layers"). Every
/// output row is its own dot product, so the bits equal ops.matmul on the whole matrix.
class StreamedMatrix {
 public:
  virtual ~StreamedMatrix() = default;
  /// out[t·rows + r] = (W x_t)[r] for t < n, x row-major [n, cols].
  virtual void matmul(const Ops& ops, const float* x, std::size_t n, float* out) = 0;
};

/// Dense MLP of the layers below first_k_dense_replace, `mlp.`. Each matrix is either a
/// resident view or, in a split layer, streamed (then the view is empty).
struct DenseMlpWeights {
  Bf16Matrix gate_proj, up_proj;  ///< [intermediate, E]
  Bf16Matrix down_proj;           ///< [E, intermediate]
  StreamedMatrix* gate_stream = nullptr;
  StreamedMatrix* up_stream = nullptr;
  StreamedMatrix* down_stream = nullptr;
};

/// One routed expert (MXFP4). I = moe_intermediate_size, L = routed_expert_hidden_size.
struct ExpertWeights {
  sdk::Mxfp4Matrix w1;  ///< gate [I, L]
  sdk::Mxfp4Matrix w3;  ///< up   [I, L]
  sdk::Mxfp4Matrix w2;  ///< down [L, I]
};

/// Stable LatentMoE trunk part, `block_sparse_moe.` (experts are separate).
struct MoeWeights {
  Bf16Matrix gate;                        ///< router [N_exp, E]
  const float* bias = nullptr;            ///< e_score_correction_bias [N_exp] f32 (selection only)
  Bf16Matrix down;                        ///< routed_expert_down_proj [L, E]
  std::vector<float> latent_norm;         ///< routed_expert_norm [L]
  Bf16Matrix up;                          ///< routed_expert_up_proj [E, L]
  Bf16Matrix shared_gate, shared_up;      ///< [I·n_shared, E]
  Bf16Matrix shared_down;                 ///< [E, I·n_shared]
};

struct LayerWeights {
  std::vector<float> input_layernorm;          ///< [E]
  std::vector<float> post_attention_layernorm; ///< [E]
  std::vector<float> attn_res_norm, attn_res_proj;  ///< [E], [1,E]
  std::vector<float> mlp_res_norm, mlp_res_proj;    ///< [E], [1,E]
  bool mla = false;
  bool dense = false;
  KdaWeights kda;
  MlaWeights mla_w;
  DenseMlpWeights dense_w;
  MoeWeights moe;
  std::vector<ExpertWeights> experts;  ///< [N_exp] when resident
};

struct GlobalWeights {
  Bf16Matrix embed_tokens;                 ///< [V, E]
  std::vector<float> norm;                 ///< [E]
  std::vector<float> out_res_norm;         ///< output_attn_res_norm [E]
  std::vector<float> out_res_proj;         ///< output_attn_res_proj [1, E]
  Bf16Matrix lm_head;                      ///< [V, E]
};

}  // namespace k3::model
