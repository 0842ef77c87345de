#include "streaming/layer_loader.hpp"

#include <cstring>

#include "streaming/tensor_reader.hpp"

namespace k3::model {
namespace {

using Shape = std::vector<std::uint64_t>;
using U = std::uint64_t;

const std::string kPrefix = "language_model.model.";

/// Queues tensors of one group (global, or one layer) and turns handles into views.
class Binder {
 public:
  explicit Binder(TensorReader& reader) : reader_(reader) {}

  std::size_t bf16(const std::string& name, U rows, U cols) { return reader_.want(name, DType::bf16, {rows, cols}); }
  std::size_t vec_bf16(const std::string& name, U n) { return reader_.want(name, DType::bf16, {n}); }
  std::size_t row_bf16(const std::string& name, U n) { return reader_.want(name, DType::bf16, {1, n}); }
  std::size_t f32(const std::string& name, const Shape& s) { return reader_.want(name, DType::f32, s); }
  std::size_t u8(const std::string& name, U rows, U cols) { return reader_.want(name, DType::u8, {rows, cols}); }

  void read(std::vector<AlignedBuffer>& keep) {
    keep.push_back(reader_.read_all());
    base_ = keep.back().data();
  }
  void set_base(const std::byte* base) { base_ = base; }

  [[nodiscard]] Bf16Matrix matrix(std::size_t h) const {
    const auto& info = reader_.info(h);
    return {reinterpret_cast<const std::uint16_t*>(reader_.data(base_, h)), info.shape[0], info.shape[1]};
  }
  [[nodiscard]] std::vector<float> floats(std::size_t h) const {
    const auto& info = reader_.info(h);
    const std::size_t n = info.nbytes / 2;
    std::vector<float> out(n);
    const auto* src = reinterpret_cast<const std::uint16_t*>(reader_.data(base_, h));
    for (std::size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(src[i]);
    return out;
  }
  [[nodiscard]] const float* f32_ptr(std::size_t h) const {
    return reinterpret_cast<const float*>(reader_.data(base_, h));
  }
  [[nodiscard]] const std::uint8_t* u8_ptr(std::size_t h) const {
    return reinterpret_cast<const std::uint8_t*>(reader_.data(base_, h));
  }

 private:
  TensorReader& reader_;
  const std::byte* base_ = nullptr;
};

struct ExpertHandles {
  std::size_t packed[3];
  std::size_t scales[3];
};

}  // namespace

/// Handles of one queued layer (see queue()).
struct LayerLoader::Handles {
  std::size_t in_norm = 0, post_norm = 0, ar_norm = 0, ar_proj = 0, mr_norm = 0, mr_proj = 0;
  std::size_t h[16] = {};
  std::size_t f[8] = {};
  std::vector<ExpertHandles> eh;
  bool with_experts = false;
  bool without_dense_ffn = false;
};

LayerLoader::LayerLoader(const ModelConfig& c, TensorReader& reader) : c_(c), reader_(reader) {}
LayerLoader::~LayerLoader() = default;

std::uint64_t LayerLoader::queue(std::size_t li, bool with_experts, bool without_dense_ffn) {
  const ModelConfig& c = c_;
  TensorReader& reader = reader_;
  reader.clear();
  layer_ = li;
  hd_ = std::make_unique<Handles>();
  Handles& H_ = *hd_;
  H_.with_experts = with_experts;
  H_.without_dense_ffn = without_dense_ffn;
  const U E = static_cast<U>(c.hidden_size);
  const U H = static_cast<U>(c.kda_num_heads), D = static_cast<U>(c.kda_head_dim);
  const U P = H * D, K = static_cast<U>(c.short_conv_kernel_size);
  const U MH = static_cast<U>(c.num_attention_heads), QL = static_cast<U>(c.q_lora_rank);
  const U KVL = static_cast<U>(c.kv_lora_rank), NOPE = static_cast<U>(c.qk_nope_head_dim);
  const U ROPE = static_cast<U>(c.qk_rope_head_dim), HV = static_cast<U>(c.v_head_dim);
  const U NE = static_cast<U>(c.num_experts), I = static_cast<U>(c.moe_intermediate_size);
  const U L = static_cast<U>(c.routed_expert_hidden_size), NS = static_cast<U>(c.num_shared_experts);
  const U DI = static_cast<U>(c.intermediate_size);

  const bool mla_layer = c.is_mla(static_cast<std::int64_t>(li));
  const bool dense_layer = c.is_dense(static_cast<std::int64_t>(li));
  Binder b(reader);
  const std::string p = kPrefix + "layers." + std::to_string(li) + ".";
  H_.in_norm = b.vec_bf16(p + "input_layernorm.weight", E);
  H_.post_norm = b.vec_bf16(p + "post_attention_layernorm.weight", E);
  H_.ar_norm = b.vec_bf16(p + "self_attention_res_norm.weight", E);
  H_.ar_proj = b.row_bf16(p + "self_attention_res_proj.weight", E);
  H_.mr_norm = b.vec_bf16(p + "mlp_res_norm.weight", E);
  H_.mr_proj = b.row_bf16(p + "mlp_res_proj.weight", E);

  const std::string a = p + "self_attn.";
  if (!mla_layer) {
    H_.h[0] = b.bf16(a + "q_proj.weight", P, E);
    H_.h[1] = b.bf16(a + "k_proj.weight", P, E);
    H_.h[2] = b.bf16(a + "v_proj.weight", P, E);
    H_.h[3] = b.f32(a + "q_conv1d.weight", {P, 1, K});
    H_.h[4] = b.f32(a + "k_conv1d.weight", {P, 1, K});
    H_.h[5] = b.f32(a + "v_conv1d.weight", {P, 1, K});
    H_.h[6] = b.bf16(a + "f_a_proj.weight", D, E);
    H_.h[7] = b.bf16(a + "f_b_proj.weight", P, D);
    H_.h[8] = b.bf16(a + "b_proj.weight", H, E);
    H_.h[9] = b.bf16(a + "g_proj.weight", P, E);
    H_.h[10] = b.bf16(a + "o_proj.weight", E, P);
    H_.h[11] = reader.want_any(a + "A_log", DType::f32, {{D}, {H}});
    H_.h[12] = b.f32(a + "dt_bias", {P});
    H_.h[13] = b.vec_bf16(a + "o_norm.weight", D);
  } else {
    H_.h[0] = b.bf16(a + "q_a_proj.weight", QL, E);
    H_.h[1] = b.vec_bf16(a + "q_a_layernorm.weight", QL);
    H_.h[2] = b.bf16(a + "q_b_proj.weight", MH * (NOPE + ROPE), QL);
    H_.h[3] = b.bf16(a + "kv_a_proj_with_mqa.weight", KVL + ROPE, E);
    H_.h[4] = b.vec_bf16(a + "kv_a_layernorm.weight", KVL);
    H_.h[5] = b.bf16(a + "kv_b_proj.weight", MH * (NOPE + HV), KVL);
    H_.h[6] = b.bf16(a + "g_proj.weight", MH * HV, E);
    H_.h[7] = b.bf16(a + "o_proj.weight", E, MH * HV);
  }

  if (dense_layer && without_dense_ffn) {
    // Split layer: the FFN is streamed in row chunks; its tensors are checked here all the same.
    (void)reader.index().require(p + "mlp.gate_proj.weight", DType::bf16, {DI, E});
    (void)reader.index().require(p + "mlp.up_proj.weight", DType::bf16, {DI, E});
    (void)reader.index().require(p + "mlp.down_proj.weight", DType::bf16, {E, DI});
  } else if (dense_layer) {
    H_.f[0] = b.bf16(p + "mlp.gate_proj.weight", DI, E);
    H_.f[1] = b.bf16(p + "mlp.up_proj.weight", DI, E);
    H_.f[2] = b.bf16(p + "mlp.down_proj.weight", E, DI);
  } else {
    const std::string m = p + "block_sparse_moe.";
    H_.f[0] = b.bf16(m + "gate.weight", NE, E);
    H_.f[1] = b.f32(m + "gate.e_score_correction_bias", {NE});
    H_.f[2] = b.bf16(m + "routed_expert_down_proj.weight", L, E);
    H_.f[3] = b.vec_bf16(m + "routed_expert_norm.weight", L);
    H_.f[4] = b.bf16(m + "routed_expert_up_proj.weight", E, L);
    H_.f[5] = b.bf16(m + "shared_experts.gate_proj.weight", I * NS, E);
    H_.f[6] = b.bf16(m + "shared_experts.up_proj.weight", I * NS, E);
    H_.f[7] = b.bf16(m + "shared_experts.down_proj.weight", E, I * NS);
    if (with_experts) H_.eh.resize(NE);
    for (U e = 0; with_experts && e < NE; ++e) {
      const std::string x = m + "experts." + std::to_string(e) + ".";
      const U rows[3] = {I, L, I};  // w1 [I, L], w2 [L, I], w3 [I, L]
      const U cols[3] = {L, I, L};
      const char* names[3] = {"w1", "w2", "w3"};
      for (int k = 0; k < 3; ++k) {
        H_.eh[e].packed[k] = b.u8(x + names[k] + ".weight_packed", rows[k], (cols[k] + 1) / 2);
        H_.eh[e].scales[k] = b.u8(x + names[k] + ".weight_scale", rows[k], (cols[k] + 31) / 32);
      }
    }
  }

  return reader.layout();
}

void LayerLoader::read_and_bind(std::byte* base, LayerWeights& lw) {
  const ModelConfig& c = c_;
  reader_.read_into(base);
  Handles& H_ = *hd_;
  const U I = static_cast<U>(c.moe_intermediate_size), L = static_cast<U>(c.routed_expert_hidden_size);
  const U NE = static_cast<U>(c.num_experts);
  lw = LayerWeights{};
  lw.mla = c.is_mla(static_cast<std::int64_t>(layer_));
  lw.dense = c.is_dense(static_cast<std::int64_t>(layer_));
  Binder b(reader_);
  b.set_base(base);
  lw.input_layernorm = b.floats(H_.in_norm);
  lw.post_attention_layernorm = b.floats(H_.post_norm);
  lw.attn_res_norm = b.floats(H_.ar_norm);
  lw.attn_res_proj = b.floats(H_.ar_proj);
  lw.mlp_res_norm = b.floats(H_.mr_norm);
  lw.mlp_res_proj = b.floats(H_.mr_proj);
  if (!lw.mla) {
    KdaWeights& k = lw.kda;
    k.q_proj = b.matrix(H_.h[0]);
    k.k_proj = b.matrix(H_.h[1]);
    k.v_proj = b.matrix(H_.h[2]);
    k.q_conv = b.f32_ptr(H_.h[3]);
    k.k_conv = b.f32_ptr(H_.h[4]);
    k.v_conv = b.f32_ptr(H_.h[5]);
    k.f_a_proj = b.matrix(H_.h[6]);
    k.f_b_proj = b.matrix(H_.h[7]);
    k.b_proj = b.matrix(H_.h[8]);
    k.g_proj = b.matrix(H_.h[9]);
    k.o_proj = b.matrix(H_.h[10]);
    k.A_log = b.f32_ptr(H_.h[11]);
    k.dt_bias = b.f32_ptr(H_.h[12]);
    k.o_norm = b.floats(H_.h[13]);
  } else {
    MlaWeights& m = lw.mla_w;
    m.q_a_proj = b.matrix(H_.h[0]);
    m.q_a_layernorm = b.floats(H_.h[1]);
    m.q_b_proj = b.matrix(H_.h[2]);
    m.kv_a_proj_with_mqa = b.matrix(H_.h[3]);
    m.kv_a_layernorm = b.floats(H_.h[4]);
    m.kv_b_proj = b.matrix(H_.h[5]);
    m.g_proj = b.matrix(H_.h[6]);
    m.o_proj = b.matrix(H_.h[7]);
  }
  if (lw.dense && H_.without_dense_ffn) {
    lw.dense_w = {};  // the streamed trunk attaches the row-chunk streams
  } else if (lw.dense) {
    lw.dense_w = {};
    lw.dense_w.gate_proj = b.matrix(H_.f[0]);
    lw.dense_w.up_proj = b.matrix(H_.f[1]);
    lw.dense_w.down_proj = b.matrix(H_.f[2]);
  } else {
    MoeWeights& m = lw.moe;
    m.gate = b.matrix(H_.f[0]);
    m.bias = b.f32_ptr(H_.f[1]);
    m.down = b.matrix(H_.f[2]);
    m.latent_norm = b.floats(H_.f[3]);
    m.up = b.matrix(H_.f[4]);
    m.shared_gate = b.matrix(H_.f[5]);
    m.shared_up = b.matrix(H_.f[6]);
    m.shared_down = b.matrix(H_.f[7]);
    if (H_.with_experts) lw.experts.resize(NE);
    for (U e = 0; H_.with_experts && e < NE; ++e) {
      auto mx = [&](int k, U rows, U cols) {
        return sdk::Mxfp4Matrix{b.u8_ptr(H_.eh[e].packed[k]), b.u8_ptr(H_.eh[e].scales[k]), rows, cols};
      };
      lw.experts[e] = {mx(0, I, L), mx(2, I, L), mx(1, L, I)};
    }
  }
}

GlobalWeights load_global(const ModelConfig& c, TensorReader& reader, bool tables, std::vector<AlignedBuffer>& keep) {
  GlobalWeights global_;
  const U E = static_cast<U>(c.hidden_size), V = static_cast<U>(c.vocab_size);
  reader.clear();
  Binder b(reader);
  const std::size_t none = static_cast<std::size_t>(-1);
  const auto emb = tables ? b.bf16(kPrefix + "embed_tokens.weight", V, E) : none;
  const auto norm = b.vec_bf16(kPrefix + "norm.weight", E);
  const auto onorm = b.vec_bf16(kPrefix + "output_attn_res_norm.weight", E);
  const auto oproj = b.row_bf16(kPrefix + "output_attn_res_proj.weight", E);
  const auto head = tables ? b.bf16("language_model.lm_head.weight", V, E) : none;
  b.read(keep);
  if (tables) global_.embed_tokens = b.matrix(emb);
  global_.norm = b.floats(norm);
  global_.out_res_norm = b.floats(onorm);
  global_.out_res_proj = b.floats(oproj);
  if (tables) global_.lm_head = b.matrix(head);
  reader.clear();
  return global_;
}

ResidentWeights::ResidentWeights(const ModelConfig& c, const CheckpointIndex& index, sdk::StorageBackend& storage,
                                 const PackedLocations* packed) {
  TensorReader reader(index, storage, packed);
  global_ = load_global(c, reader, true, buffers_);
  LayerLoader loader(c, reader);
  layers_.resize(static_cast<std::size_t>(c.num_hidden_layers));
  for (std::size_t li = 0; li < layers_.size(); ++li) {
    buffers_.emplace_back(loader.queue(li, true));
    loader.read_and_bind(buffers_.back().data(), layers_[li]);
  }
  reader.clear();
  bytes_read_ = reader.bytes_read();
}

}  // namespace k3::model
