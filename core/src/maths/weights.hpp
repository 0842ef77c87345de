// Weights of the K3 text model as the maths sees them: views into buffers someone else
// loaded (streaming/layer_loader.hpp binds them, by the tensor table of
// model/tensor_table.hpp). Every view names its shape; matrices carry their dtype.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <k3/checkpoint.hpp>
#include <k3/kernels.hpp>
#include <k3/model_config.hpp>

#include "maths/ops.hpp"

namespace k3::maths {

/// An fp32 vector (norm weights, AttnRes vectors, convolution kernels, biases): it points at
/// F32 bytes where they were loaded, or holds the exact fp32 widening of BF16 bytes (done
/// when the layer is bound, never inside the maths), in its own memory or in memory the
/// loader placed next to the layer's tensors (widen_into). Copies stay valid.
class F32Vector {
 public:
  void point(const float* p, std::size_t n) {
    own_.clear();
    at_ = p;
    n_ = n;
  }
  void widen(const std::uint16_t* p, std::size_t n) {
    own_.resize(n);
    for (std::size_t i = 0; i < n; ++i) own_[i] = bf16_to_f32(p[i]);
    at_ = nullptr;
    n_ = n;
  }
  /// As widen(), into `dst` (n floats the caller owns, which outlive every copy): a
  /// streamed slot is rebound every token, and owned memory would be allocated each time.
  void widen_into(const std::uint16_t* p, std::size_t n, float* dst) {
    own_.clear();
    for (std::size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(p[i]);
    at_ = dst;
    n_ = n;
  }
  [[nodiscard]] const float* data() const noexcept { return at_ != nullptr ? at_ : own_.data(); }
  [[nodiscard]] std::size_t size() const noexcept { return n_; }
  [[nodiscard]] float operator[](std::size_t i) const noexcept { return data()[i]; }

 private:
  std::vector<float> own_;
  const float* at_ = nullptr;
  std::size_t n_ = 0;
};

/// Kimi Delta Attention, `self_attn.` of a KDA layer. P = H·D. Matrices are BF16 or F32.
struct KdaWeights {
  Matrix q_proj, k_proj, v_proj;  ///< [P, E]
  F32Vector q_conv;               ///< [P, 1, K] (tap K-1 = current token)
  F32Vector k_conv;               ///< [P, 1, K]
  F32Vector v_conv;               ///< [P, 1, K]
  Matrix f_a_proj;                ///< [D, E]
  Matrix f_b_proj;                ///< [P, D]
  Matrix b_proj;                  ///< [H, E]
  Matrix g_proj;                  ///< [P, E]
  Matrix o_proj;                  ///< [E, P]
  F32Vector A_log;                ///< [D] or [H]; only the first H are used
  F32Vector dt_bias;              ///< [P]
  F32Vector o_norm;               ///< [D], shared by all heads
};

/// Gated MLA without RoPE, `self_attn.` of an MLA layer. Hq = nope + rope, Hv = v_head_dim.
struct MlaWeights {
  Matrix q_a_proj;            ///< [q_lora, E]
  F32Vector q_a_layernorm;    ///< [q_lora]
  Matrix q_b_proj;            ///< [heads·Hq, q_lora]
  Matrix kv_a_proj_with_mqa;  ///< [kv_lora + rope, E]
  F32Vector kv_a_layernorm;   ///< [kv_lora]
  Matrix kv_b_proj;           ///< [heads·(nope + Hv), kv_lora]; per head nope k rows then Hv v rows
  Matrix g_proj;              ///< [heads·Hv, E]
  Matrix o_proj;              ///< [E, heads·Hv]
};

/// A matrix that is not in memory: multiplied while it is read from storage in row
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
  Matrix gate_proj, up_proj;  ///< [intermediate, E]
  Matrix down_proj;           ///< [E, intermediate]
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
  Matrix gate;                    ///< router [N_exp, E]
  F32Vector bias;                 ///< e_score_correction_bias [N_exp] (selection only)
  Matrix down;                    ///< routed_expert_down_proj [L, E]
  F32Vector latent_norm;          ///< routed_expert_norm [L]
  Matrix up;                      ///< routed_expert_up_proj [E, L]
  Matrix shared_gate, shared_up;  ///< [I·n_shared, E]
  Matrix shared_down;             ///< [E, I·n_shared]
};

struct LayerWeights {
  F32Vector input_layernorm;               ///< [E]
  F32Vector post_attention_layernorm;      ///< [E]
  F32Vector attn_res_norm, attn_res_proj;  ///< [E], [1,E]
  F32Vector mlp_res_norm, mlp_res_proj;    ///< [E], [1,E]
  bool mla = false;
  bool dense = false;
  KdaWeights kda;
  MlaWeights mla_w;
  DenseMlpWeights dense_w;
  MoeWeights moe;
  std::vector<ExpertWeights> experts;  ///< [N_exp] when resident
};

struct GlobalWeights {
  Matrix embed_tokens;     ///< [V, E]
  F32Vector norm;          ///< [E]
  F32Vector out_res_norm;  ///< output_attn_res_norm [E]
  F32Vector out_res_proj;  ///< output_attn_res_proj [1, E]
  Matrix lm_head;          ///< [V, E]
};

}  // namespace k3::maths
