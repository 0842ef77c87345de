// The checkpoint layout of a geometry: every tensor name, dtype and shape of K3-MODEL.md §2,
// grouped and ordered as make-model writes them.
#include <k3/geometry.hpp>

namespace k3 {

std::uint64_t TensorSpec::nbytes() const {
  std::uint64_t n = element_size(dtype);
  for (auto d : shape) n *= d;
  return n;
}

std::uint64_t TensorGroup::nbytes() const {
  std::uint64_t n = 0;
  for (const auto& t : tensors) n += t.nbytes();
  return n;
}

namespace tensor_names {

std::string layer(std::int64_t layer, std::string_view suffix) {
  std::string s(kModel);
  s += "layers.";
  s += std::to_string(layer);
  s += '.';
  s += suffix;
  return s;
}

std::string expert(std::int64_t layer_index, std::int64_t expert_id, int w, bool scale) {
  std::string s = layer(layer_index, "block_sparse_moe.experts.");
  s += std::to_string(expert_id);
  s += ".w";
  s += static_cast<char>('0' + w);
  s += scale ? ".weight_scale" : ".weight_packed";
  return s;
}

}  // namespace tensor_names

namespace {

using U = std::uint64_t;
U u(std::int64_t v) { return static_cast<U>(v); }

struct GroupBuilder {
  TensorGroup g;
  std::int64_t layer;
  void add(std::string_view suffix, DType t, std::vector<U> shape) {
    g.tensors.push_back({tensor_names::layer(layer, suffix), t, std::move(shape)});
  }
};

TensorGroup layer_trunk(const ModelConfig& c, std::int64_t i) {
  const U E = u(c.hidden_size);
  GroupBuilder b{{TensorGroup::Kind::layer_trunk, i, -1, {}}, i};
  // Norms and AttnRes vectors of every layer: [E] BF16; the projections are [1, E].
  b.add("input_layernorm.weight", DType::bf16, {E});
  b.add("post_attention_layernorm.weight", DType::bf16, {E});
  b.add("self_attention_res_norm.weight", DType::bf16, {E});
  b.add("self_attention_res_proj.weight", DType::bf16, {1, E});
  b.add("mlp_res_norm.weight", DType::bf16, {E});
  b.add("mlp_res_proj.weight", DType::bf16, {1, E});
  if (c.is_mla(i)) {
    const U H = u(c.num_attention_heads), qh = u(c.qk_nope_head_dim + c.qk_rope_head_dim);
    const U ql = u(c.q_lora_rank), kvl = u(c.kv_lora_rank), rope = u(c.qk_rope_head_dim);
    const U kvd = u(c.qk_nope_head_dim + c.v_head_dim), vh = u(c.v_head_dim);
    b.add("self_attn.q_a_proj.weight", DType::bf16, {ql, E});
    b.add("self_attn.q_a_layernorm.weight", DType::bf16, {ql});
    b.add("self_attn.q_b_proj.weight", DType::bf16, {H * qh, ql});
    b.add("self_attn.kv_a_proj_with_mqa.weight", DType::bf16, {kvl + rope, E});
    b.add("self_attn.kv_a_layernorm.weight", DType::bf16, {kvl});
    b.add("self_attn.kv_b_proj.weight", DType::bf16, {H * kvd, kvl});
    if (c.mla_use_output_gate) b.add("self_attn.g_proj.weight", DType::bf16, {H * vh, E});
    b.add("self_attn.o_proj.weight", DType::bf16, {E, H * vh});
  } else {
    const U H = u(c.kda_num_heads), D = u(c.kda_head_dim), P = H * D, K = u(c.short_conv_kernel_size);
    b.add("self_attn.q_proj.weight", DType::bf16, {P, E});
    b.add("self_attn.k_proj.weight", DType::bf16, {P, E});
    b.add("self_attn.v_proj.weight", DType::bf16, {P, E});
    b.add("self_attn.q_conv1d.weight", DType::f32, {P, 1, K});
    b.add("self_attn.k_conv1d.weight", DType::f32, {P, 1, K});
    b.add("self_attn.v_conv1d.weight", DType::f32, {P, 1, K});
    b.add("self_attn.f_a_proj.weight", DType::bf16, {D, E});
    b.add("self_attn.f_b_proj.weight", DType::bf16, {P, D});
    b.add("self_attn.b_proj.weight", DType::bf16, {H, E});
    b.add("self_attn.g_proj.weight", DType::bf16, {P, E});
    b.add("self_attn.o_proj.weight", DType::bf16, {E, P});
    b.add("self_attn.A_log", DType::f32, {D});  // padded to D as released; the first H are used
    b.add("self_attn.dt_bias", DType::f32, {P});
    b.add("self_attn.o_norm.weight", DType::bf16, {D});
  }
  if (c.is_dense(i)) {
    const U I = u(c.intermediate_size);
    b.add("mlp.gate_proj.weight", DType::bf16, {I, E});
    b.add("mlp.up_proj.weight", DType::bf16, {I, E});
    b.add("mlp.down_proj.weight", DType::bf16, {E, I});
  } else {
    const U N = u(c.num_experts), L = u(c.routed_expert_hidden_size), SI = u(c.moe_intermediate_size * c.num_shared_experts);
    b.add("block_sparse_moe.gate.weight", DType::bf16, {N, E});
    b.add("block_sparse_moe.gate.e_score_correction_bias", DType::f32, {N});
    b.add("block_sparse_moe.routed_expert_down_proj.weight", DType::bf16, {L, E});
    b.add("block_sparse_moe.routed_expert_norm.weight", DType::bf16, {L});
    b.add("block_sparse_moe.routed_expert_up_proj.weight", DType::bf16, {E, L});
    b.add("block_sparse_moe.shared_experts.gate_proj.weight", DType::bf16, {SI, E});
    b.add("block_sparse_moe.shared_experts.up_proj.weight", DType::bf16, {SI, E});
    b.add("block_sparse_moe.shared_experts.down_proj.weight", DType::bf16, {E, SI});
  }
  return std::move(b.g);
}

TensorGroup routed_expert(const ModelConfig& c, std::int64_t layer, std::int64_t e) {
  const U I = u(c.moe_intermediate_size), L = u(c.routed_expert_hidden_size);
  TensorGroup g{TensorGroup::Kind::routed_expert, layer, e, {}};
  // w1 (gate) and w3 (up): logical [I, L]; w2 (down): logical [L, I]. MXFP4: two codes per
  // byte along the columns, one scale byte per 32 columns.
  const U rows[3] = {I, L, I}, cols[3] = {L, I, L};
  for (int w = 1; w <= 3; ++w) {
    g.tensors.push_back({tensor_names::expert(layer, e, w, false), DType::u8, {rows[w - 1], cols[w - 1] / 2}});
    g.tensors.push_back({tensor_names::expert(layer, e, w, true), DType::u8, {rows[w - 1], cols[w - 1] / 32}});
  }
  return g;
}

}  // namespace

void for_each_tensor_group(const ModelConfig& c, const std::function<void(TensorGroup&&)>& fn) {
  const U V = u(c.vocab_size), E = u(c.hidden_size);
  const std::string m(tensor_names::kModel);
  fn(TensorGroup{TensorGroup::Kind::embedding, -1, -1, {{m + "embed_tokens.weight", DType::bf16, {V, E}}}});
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    fn(layer_trunk(c, i));
    if (!c.is_dense(i))
      for (std::int64_t e = 0; e < c.num_experts; ++e) fn(routed_expert(c, i, e));
  }
  fn(TensorGroup{TensorGroup::Kind::output, -1, -1,
                 {{m + "norm.weight", DType::bf16, {E}},
                  {m + "output_attn_res_norm.weight", DType::bf16, {E}},
                  {m + "output_attn_res_proj.weight", DType::bf16, {1, E}},
                  {std::string(tensor_names::kLmHead), DType::bf16, {V, E}}}});
}

std::vector<TensorGroup> checkpoint_layout(const ModelConfig& c) {
  std::vector<TensorGroup> groups;
  for_each_tensor_group(c, [&](TensorGroup&& g) { groups.push_back(std::move(g)); });
  return groups;
}

GeometryCensus geometry_census(const ModelConfig& c) {
  GeometryCensus s;
  for_each_tensor_group(c, [&](TensorGroup&& g) {
    for (const auto& t : g.tensors) {
      ++s.tensors;
      const U b = t.nbytes();
      s.bytes += b;
      if (g.kind != TensorGroup::Kind::routed_expert) {
        s.params += b / element_size(t.dtype);
      } else if (t.name.ends_with("weight_packed")) {
        s.params += 2 * b;  // two 4-bit codes per byte
        s.expert_params += 2 * b;
      }
      if (g.kind == TensorGroup::Kind::routed_expert) s.expert_bytes += b;
    }
    if (g.kind == TensorGroup::Kind::routed_expert) s.bytes_per_expert = g.nbytes();
  });
  return s;
}

}  // namespace k3
