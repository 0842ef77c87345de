#include "model/weights.hpp"

#include <cstring>

#include "model/tensor_reader.hpp"

namespace k3::model {
namespace {

using Shape = std::vector<std::uint64_t>;
using U = std::uint64_t;

const std::string kPrefix = "language_model.model.";

/// Queues tensors of one group (global, or one layer) and turns handles into views.
class Binder {
 public:
  Binder(TensorReader& reader) : reader_(reader) {}

  struct Pending {
    std::size_t handle;
  };

  std::size_t bf16(const std::string& name, U rows, U cols) { return reader_.want(name, DType::bf16, {rows, cols}); }
  std::size_t vec_bf16(const std::string& name, U n) { return reader_.want(name, DType::bf16, {n}); }
  std::size_t row_bf16(const std::string& name, U n) { return reader_.want(name, DType::bf16, {1, n}); }
  std::size_t f32(const std::string& name, const Shape& s) { return reader_.want(name, DType::f32, s); }
  std::size_t u8(const std::string& name, U rows, U cols) { return reader_.want(name, DType::u8, {rows, cols}); }

  void read(std::vector<AlignedBuffer>& keep) {
    buf_ = reader_.read_all();
    current_ = &buf_;
    keep.push_back(std::move(buf_));
    current_ = &keep.back();
  }

  [[nodiscard]] Bf16Matrix matrix(std::size_t h) const {
    const auto& info = reader_.info(h);
    return {reinterpret_cast<const std::uint16_t*>(reader_.data(*current_, h)), info.shape[0], info.shape[1]};
  }
  [[nodiscard]] std::vector<float> floats(std::size_t h) const {
    const auto& info = reader_.info(h);
    const std::size_t n = info.nbytes / 2;
    std::vector<float> out(n);
    const auto* src = reinterpret_cast<const std::uint16_t*>(reader_.data(*current_, h));
    for (std::size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(src[i]);
    return out;
  }
  [[nodiscard]] const float* f32_ptr(std::size_t h) const {
    return reinterpret_cast<const float*>(reader_.data(*current_, h));
  }
  [[nodiscard]] const std::uint8_t* u8_ptr(std::size_t h) const {
    return reinterpret_cast<const std::uint8_t*>(reader_.data(*current_, h));
  }

 private:
  TensorReader& reader_;
  AlignedBuffer buf_;
  const AlignedBuffer* current_ = nullptr;
};

struct ExpertHandles {
  std::size_t packed[3];
  std::size_t scales[3];
};

}  // namespace

ResidentWeights::ResidentWeights(const ModelConfig& c, const CheckpointIndex& index, sdk::StorageBackend& storage) {
  TensorReader reader(index, storage);
  const U E = static_cast<U>(c.hidden_size), V = static_cast<U>(c.vocab_size);

  {  // Global tensors.
    Binder b(reader);
    const auto emb = b.bf16(kPrefix + "embed_tokens.weight", V, E);
    const auto norm = b.vec_bf16(kPrefix + "norm.weight", E);
    const auto onorm = b.vec_bf16(kPrefix + "output_attn_res_norm.weight", E);
    const auto oproj = b.row_bf16(kPrefix + "output_attn_res_proj.weight", E);
    const auto head = b.bf16("language_model.lm_head.weight", V, E);
    b.read(buffers_);
    global_.embed_tokens = b.matrix(emb);
    global_.norm = b.floats(norm);
    global_.out_res_norm = b.floats(onorm);
    global_.out_res_proj = b.floats(oproj);
    global_.lm_head = b.matrix(head);
    reader.clear();
  }

  const U H = static_cast<U>(c.kda_num_heads), D = static_cast<U>(c.kda_head_dim);
  const U P = H * D, K = static_cast<U>(c.short_conv_kernel_size);
  const U MH = static_cast<U>(c.num_attention_heads), QL = static_cast<U>(c.q_lora_rank);
  const U KVL = static_cast<U>(c.kv_lora_rank), NOPE = static_cast<U>(c.qk_nope_head_dim);
  const U ROPE = static_cast<U>(c.qk_rope_head_dim), HV = static_cast<U>(c.v_head_dim);
  const U NE = static_cast<U>(c.num_experts), I = static_cast<U>(c.moe_intermediate_size);
  const U L = static_cast<U>(c.routed_expert_hidden_size), NS = static_cast<U>(c.num_shared_experts);
  const U DI = static_cast<U>(c.intermediate_size);

  layers_.resize(static_cast<std::size_t>(c.num_hidden_layers));
  for (std::size_t li = 0; li < layers_.size(); ++li) {
    LayerWeights& lw = layers_[li];
    lw.mla = c.is_mla(static_cast<std::int64_t>(li));
    lw.dense = c.is_dense(static_cast<std::int64_t>(li));
    const std::string p = kPrefix + "layers." + std::to_string(li) + ".";
    Binder b(reader);
    const auto in_norm = b.vec_bf16(p + "input_layernorm.weight", E);
    const auto post_norm = b.vec_bf16(p + "post_attention_layernorm.weight", E);
    const auto ar_norm = b.vec_bf16(p + "self_attention_res_norm.weight", E);
    const auto ar_proj = b.row_bf16(p + "self_attention_res_proj.weight", E);
    const auto mr_norm = b.vec_bf16(p + "mlp_res_norm.weight", E);
    const auto mr_proj = b.row_bf16(p + "mlp_res_proj.weight", E);

    const std::string a = p + "self_attn.";
    std::size_t h[16] = {};
    if (!lw.mla) {
      h[0] = b.bf16(a + "q_proj.weight", P, E);
      h[1] = b.bf16(a + "k_proj.weight", P, E);
      h[2] = b.bf16(a + "v_proj.weight", P, E);
      h[3] = b.f32(a + "q_conv1d.weight", {P, 1, K});
      h[4] = b.f32(a + "k_conv1d.weight", {P, 1, K});
      h[5] = b.f32(a + "v_conv1d.weight", {P, 1, K});
      h[6] = b.bf16(a + "f_a_proj.weight", D, E);
      h[7] = b.bf16(a + "f_b_proj.weight", P, D);
      h[8] = b.bf16(a + "b_proj.weight", H, E);
      h[9] = b.bf16(a + "g_proj.weight", P, E);
      h[10] = b.bf16(a + "o_proj.weight", E, P);
      h[11] = reader.want_any(a + "A_log", DType::f32, {{D}, {H}});
      h[12] = b.f32(a + "dt_bias", {P});
      h[13] = b.vec_bf16(a + "o_norm.weight", D);
    } else {
      h[0] = b.bf16(a + "q_a_proj.weight", QL, E);
      h[1] = b.vec_bf16(a + "q_a_layernorm.weight", QL);
      h[2] = b.bf16(a + "q_b_proj.weight", MH * (NOPE + ROPE), QL);
      h[3] = b.bf16(a + "kv_a_proj_with_mqa.weight", KVL + ROPE, E);
      h[4] = b.vec_bf16(a + "kv_a_layernorm.weight", KVL);
      h[5] = b.bf16(a + "kv_b_proj.weight", MH * (NOPE + HV), KVL);
      h[6] = b.bf16(a + "g_proj.weight", MH * HV, E);
      h[7] = b.bf16(a + "o_proj.weight", E, MH * HV);
    }

    std::size_t f[8] = {};
    std::vector<ExpertHandles> eh;
    if (lw.dense) {
      f[0] = b.bf16(p + "mlp.gate_proj.weight", DI, E);
      f[1] = b.bf16(p + "mlp.up_proj.weight", DI, E);
      f[2] = b.bf16(p + "mlp.down_proj.weight", E, DI);
    } else {
      const std::string m = p + "block_sparse_moe.";
      f[0] = b.bf16(m + "gate.weight", NE, E);
      f[1] = b.f32(m + "gate.e_score_correction_bias", {NE});
      f[2] = b.bf16(m + "routed_expert_down_proj.weight", L, E);
      f[3] = b.vec_bf16(m + "routed_expert_norm.weight", L);
      f[4] = b.bf16(m + "routed_expert_up_proj.weight", E, L);
      f[5] = b.bf16(m + "shared_experts.gate_proj.weight", I * NS, E);
      f[6] = b.bf16(m + "shared_experts.up_proj.weight", I * NS, E);
      f[7] = b.bf16(m + "shared_experts.down_proj.weight", E, I * NS);
      eh.resize(NE);
      for (U e = 0; e < NE; ++e) {
        const std::string x = m + "experts." + std::to_string(e) + ".";
        const U rows[3] = {I, L, I};  // w1 [I, L], w2 [L, I], w3 [I, L]
        const U cols[3] = {L, I, L};
        const char* names[3] = {"w1", "w2", "w3"};
        for (int k = 0; k < 3; ++k) {
          eh[e].packed[k] = b.u8(x + names[k] + ".weight_packed", rows[k], (cols[k] + 1) / 2);
          eh[e].scales[k] = b.u8(x + names[k] + ".weight_scale", rows[k], (cols[k] + 31) / 32);
        }
      }
    }

    b.read(buffers_);
    lw.input_layernorm = b.floats(in_norm);
    lw.post_attention_layernorm = b.floats(post_norm);
    lw.attn_res_norm = b.floats(ar_norm);
    lw.attn_res_proj = b.floats(ar_proj);
    lw.mlp_res_norm = b.floats(mr_norm);
    lw.mlp_res_proj = b.floats(mr_proj);
    if (!lw.mla) {
      KdaWeights& k = lw.kda;
      k.q_proj = b.matrix(h[0]);
      k.k_proj = b.matrix(h[1]);
      k.v_proj = b.matrix(h[2]);
      k.q_conv = b.f32_ptr(h[3]);
      k.k_conv = b.f32_ptr(h[4]);
      k.v_conv = b.f32_ptr(h[5]);
      k.f_a_proj = b.matrix(h[6]);
      k.f_b_proj = b.matrix(h[7]);
      k.b_proj = b.matrix(h[8]);
      k.g_proj = b.matrix(h[9]);
      k.o_proj = b.matrix(h[10]);
      k.A_log = b.f32_ptr(h[11]);
      k.dt_bias = b.f32_ptr(h[12]);
      k.o_norm = b.floats(h[13]);
    } else {
      MlaWeights& m = lw.mla_w;
      m.q_a_proj = b.matrix(h[0]);
      m.q_a_layernorm = b.floats(h[1]);
      m.q_b_proj = b.matrix(h[2]);
      m.kv_a_proj_with_mqa = b.matrix(h[3]);
      m.kv_a_layernorm = b.floats(h[4]);
      m.kv_b_proj = b.matrix(h[5]);
      m.g_proj = b.matrix(h[6]);
      m.o_proj = b.matrix(h[7]);
    }
    if (lw.dense) {
      lw.dense_w = {b.matrix(f[0]), b.matrix(f[1]), b.matrix(f[2])};
    } else {
      MoeWeights& m = lw.moe;
      m.gate = b.matrix(f[0]);
      m.bias = b.f32_ptr(f[1]);
      m.down = b.matrix(f[2]);
      m.latent_norm = b.floats(f[3]);
      m.up = b.matrix(f[4]);
      m.shared_gate = b.matrix(f[5]);
      m.shared_up = b.matrix(f[6]);
      m.shared_down = b.matrix(f[7]);
      lw.experts.resize(NE);
      for (U e = 0; e < NE; ++e) {
        auto mx = [&](int k, U rows, U cols) {
          return sdk::Mxfp4Matrix{b.u8_ptr(eh[e].packed[k]), b.u8_ptr(eh[e].scales[k]), rows, cols};
        };
        lw.experts[e] = {mx(0, I, L), mx(2, I, L), mx(1, L, I)};
      }
    }
    reader.clear();
  }
  bytes_read_ = reader.bytes_read();
}

}  // namespace k3::model
