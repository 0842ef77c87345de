// The one table of checkpoint tensors (docs/model.md "Checkpoint tensors"): every tensor's
// name, shape, the dtypes it may be stored in, the dtype of each writer mix, and the part of
// the model it belongs to. Everything that names a tensor walks it: the layout of a geometry
// (make-model, the memory plan), the weight binder, the expert cache's checks and pack-trunk.
//
// Each walker calls visit(entry, field) once per tensor, in write order. `field` is a
// generic lambda returning the member of the weight views the tensor binds to (a
// LayerWeights, GlobalWeights or ExpertWeights of maths/weights.hpp); it is only instantiated
// by the binder, so this header needs no maths type. Adding a tensor is one line here.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <k3/checkpoint.hpp>
#include <k3/geometry.hpp>
#include <k3/model_config.hpp>

namespace k3::table {

using Shape = std::vector<std::uint64_t>;

/// How the maths holds a tensor: a matrix view (BF16 or F32 kernels), an fp32 vector (BF16 is
/// widened once at load, exactly), or one half of an MXFP4 matrix (U8 bytes).
enum class Form : std::uint8_t { matrix, vector, mxfp4_packed, mxfp4_scale };

/// One tensor of the checkpoint.
struct Entry {
  std::string name;
  Shape shape;      ///< as make-model writes it
  Shape alt_shape;  ///< a second accepted shape (A_log: [D] padded or [H]); empty if none
  DTypeSet dtypes;  ///< what the loader accepts
  DType release{};  ///< the released checkpoint's dtype (make-model --dtypes release)
  Form form{};
  TensorPart part{};
  std::uint64_t logical_cols = 0;  ///< MXFP4: the matrix's columns (the bytes round up)
  /// The dtype make-model writes for `mix`: compact stores BF16 wherever it is accepted, f32
  /// F32 wherever it is accepted.
  [[nodiscard]] DType dtype_in(DTypeMix mix) const {
    if (mix == DTypeMix::compact && dtypes.has(DType::bf16)) return DType::bf16;
    if (mix == DTypeMix::f32 && dtypes.has(DType::f32)) return DType::f32;
    return release;
  }
};

/// BF16 or F32: every tensor that is not a routed expert (docs/model-spec.md §2 as docs/model.md
/// restates it).
inline constexpr DTypeSet kFloat = DTypeSet{DType::bf16} | DTypeSet{DType::f32};

/// MXFP4 bytes along a row of `cols` logical columns: two codes per byte, the last byte
/// half-used for an odd count; one scale byte per 32 columns, the last group partial.
constexpr std::uint64_t mxfp4_packed_cols(std::uint64_t cols) { return (cols + 1) / 2; }
constexpr std::uint64_t mxfp4_scale_cols(std::uint64_t cols) { return (cols + 31) / 32; }

namespace detail {
inline std::uint64_t u(std::int64_t v) { return static_cast<std::uint64_t>(v); }
}  // namespace detail

/// The tensors of layer `i` other than its routed experts (the layer's trunk part), in write
/// order. A dense layer's FFN is TensorPart::dense_ffn (a split layer streams it).
template <class Visit>
void for_each_layer_tensor(const ModelConfig& c, std::int64_t i, Visit&& visit) {
  using detail::u;
  const std::uint64_t E = u(c.hidden_size);
  auto add = [&](std::string_view suffix, Form form, DType release, Shape shape, auto field,
                 TensorPart part = TensorPart::trunk, Shape alt = {}) {
    visit(Entry{tensor_names::layer(i, suffix), std::move(shape), std::move(alt), kFloat, release, form, part, 0},
          field);
  };
  constexpr auto M = Form::matrix, V = Form::vector;
  constexpr auto bf16 = DType::bf16, f32 = DType::f32;
  // The release's tensor table, one tensor a line: kept as written.
  // clang-format off
  // Norms and AttnRes vectors of every layer: [E]; the AttnRes projections are [1, E].
  add("input_layernorm.weight", V, bf16, {E}, [](auto& w) -> auto& { return w.input_layernorm; });
  add("post_attention_layernorm.weight", V, bf16, {E}, [](auto& w) -> auto& { return w.post_attention_layernorm; });
  add("self_attention_res_norm.weight", V, bf16, {E}, [](auto& w) -> auto& { return w.attn_res_norm; });
  add("self_attention_res_proj.weight", V, bf16, {1, E}, [](auto& w) -> auto& { return w.attn_res_proj; });
  add("mlp_res_norm.weight", V, bf16, {E}, [](auto& w) -> auto& { return w.mlp_res_norm; });
  add("mlp_res_proj.weight", V, bf16, {1, E}, [](auto& w) -> auto& { return w.mlp_res_proj; });
  if (c.is_mla(i)) {
    const std::uint64_t H = u(c.num_attention_heads), qh = u(c.qk_nope_head_dim + c.qk_rope_head_dim);
    const std::uint64_t ql = u(c.q_lora_rank), kvl = u(c.kv_lora_rank), rope = u(c.qk_rope_head_dim);
    const std::uint64_t kvd = u(c.qk_nope_head_dim + c.v_head_dim), vh = u(c.v_head_dim);
    add("self_attn.q_a_proj.weight", M, bf16, {ql, E}, [](auto& w) -> auto& { return w.mla_w.q_a_proj; });
    add("self_attn.q_a_layernorm.weight", V, bf16, {ql}, [](auto& w) -> auto& { return w.mla_w.q_a_layernorm; });
    add("self_attn.q_b_proj.weight", M, bf16, {H * qh, ql}, [](auto& w) -> auto& { return w.mla_w.q_b_proj; });
    add("self_attn.kv_a_proj_with_mqa.weight", M, bf16, {kvl + rope, E},
        [](auto& w) -> auto& { return w.mla_w.kv_a_proj_with_mqa; });
    add("self_attn.kv_a_layernorm.weight", V, bf16, {kvl}, [](auto& w) -> auto& { return w.mla_w.kv_a_layernorm; });
    add("self_attn.kv_b_proj.weight", M, bf16, {H * kvd, kvl}, [](auto& w) -> auto& { return w.mla_w.kv_b_proj; });
    if (c.mla_use_output_gate)
      add("self_attn.g_proj.weight", M, bf16, {H * vh, E}, [](auto& w) -> auto& { return w.mla_w.g_proj; });
    add("self_attn.o_proj.weight", M, bf16, {E, H * vh}, [](auto& w) -> auto& { return w.mla_w.o_proj; });
  } else {
    const std::uint64_t H = u(c.kda_num_heads), D = u(c.kda_head_dim), P = H * D, K = u(c.short_conv_kernel_size);
    add("self_attn.q_proj.weight", M, bf16, {P, E}, [](auto& w) -> auto& { return w.kda.q_proj; });
    add("self_attn.k_proj.weight", M, bf16, {P, E}, [](auto& w) -> auto& { return w.kda.k_proj; });
    add("self_attn.v_proj.weight", M, bf16, {P, E}, [](auto& w) -> auto& { return w.kda.v_proj; });
    add("self_attn.q_conv1d.weight", V, f32, {P, 1, K}, [](auto& w) -> auto& { return w.kda.q_conv; });
    add("self_attn.k_conv1d.weight", V, f32, {P, 1, K}, [](auto& w) -> auto& { return w.kda.k_conv; });
    add("self_attn.v_conv1d.weight", V, f32, {P, 1, K}, [](auto& w) -> auto& { return w.kda.v_conv; });
    add("self_attn.f_a_proj.weight", M, bf16, {D, E}, [](auto& w) -> auto& { return w.kda.f_a_proj; });
    add("self_attn.f_b_proj.weight", M, bf16, {P, D}, [](auto& w) -> auto& { return w.kda.f_b_proj; });
    add("self_attn.b_proj.weight", M, bf16, {H, E}, [](auto& w) -> auto& { return w.kda.b_proj; });
    add("self_attn.g_proj.weight", M, bf16, {P, E}, [](auto& w) -> auto& { return w.kda.g_proj; });
    add("self_attn.o_proj.weight", M, bf16, {E, P}, [](auto& w) -> auto& { return w.kda.o_proj; });
    // Padded to D as released (the first H are used); [H] is accepted too.
    add("self_attn.A_log", V, f32, {D}, [](auto& w) -> auto& { return w.kda.A_log; }, TensorPart::trunk, {H});
    add("self_attn.dt_bias", V, f32, {P}, [](auto& w) -> auto& { return w.kda.dt_bias; });
    add("self_attn.o_norm.weight", V, f32, {D}, [](auto& w) -> auto& { return w.kda.o_norm; });
  }
  if (c.is_dense(i)) {
    const std::uint64_t I = u(c.intermediate_size);
    constexpr auto F = TensorPart::dense_ffn;
    add("mlp.gate_proj.weight", M, bf16, {I, E}, [](auto& w) -> auto& { return w.dense_w.gate_proj; }, F);
    add("mlp.up_proj.weight", M, bf16, {I, E}, [](auto& w) -> auto& { return w.dense_w.up_proj; }, F);
    add("mlp.down_proj.weight", M, bf16, {E, I}, [](auto& w) -> auto& { return w.dense_w.down_proj; }, F);
  } else {
    const std::uint64_t N = u(c.num_experts), L = u(c.routed_expert_hidden_size);
    const std::uint64_t SI = u(c.moe_intermediate_size * c.num_shared_experts);
    const std::string m = "block_sparse_moe.";
    add(m + "gate.weight", M, bf16, {N, E}, [](auto& w) -> auto& { return w.moe.gate; });
    add(m + "gate.e_score_correction_bias", V, f32, {N}, [](auto& w) -> auto& { return w.moe.bias; });
    add(m + "routed_expert_down_proj.weight", M, bf16, {L, E}, [](auto& w) -> auto& { return w.moe.down; });
    add(m + "routed_expert_norm.weight", V, bf16, {L}, [](auto& w) -> auto& { return w.moe.latent_norm; });
    add(m + "routed_expert_up_proj.weight", M, bf16, {E, L}, [](auto& w) -> auto& { return w.moe.up; });
    add(m + "shared_experts.gate_proj.weight", M, bf16, {SI, E}, [](auto& w) -> auto& { return w.moe.shared_gate; });
    add(m + "shared_experts.up_proj.weight", M, bf16, {SI, E}, [](auto& w) -> auto& { return w.moe.shared_up; });
    add(m + "shared_experts.down_proj.weight", M, bf16, {E, SI}, [](auto& w) -> auto& { return w.moe.shared_down; });
  }
  // clang-format on
}

/// The six tensors of routed expert `e` of MoE layer `layer`, in write order (w1, w2, w3 ×
/// packed, scale). w1 (gate) and w3 (up) are logical [I, L], w2 (down) [L, I]; `field`
/// returns the ExpertWeights member the pair forms.
template <class Visit>
void for_each_expert_tensor(const ModelConfig& c, std::int64_t layer, std::int64_t e, Visit&& visit) {
  using detail::u;
  const std::uint64_t I = u(c.moe_intermediate_size), L = u(c.routed_expert_hidden_size);
  auto add = [&](int w, std::uint64_t rows, std::uint64_t cols, auto field) {
    visit(Entry{tensor_names::expert(layer, e, w, false),
                {rows, mxfp4_packed_cols(cols)},
                {},
                DTypeSet{DType::u8},
                DType::u8,
                Form::mxfp4_packed,
                TensorPart::expert,
                cols},
          field);
    visit(Entry{tensor_names::expert(layer, e, w, true),
                {rows, mxfp4_scale_cols(cols)},
                {},
                DTypeSet{DType::u8},
                DType::u8,
                Form::mxfp4_scale,
                TensorPart::expert,
                cols},
          field);
  };
  add(
      1, I, L, [](auto& x) -> auto& { return x.w1; });
  add(
      2, L, I, [](auto& x) -> auto& { return x.w2; });
  add(
      3, I, L, [](auto& x) -> auto& { return x.w3; });
}

/// The embedding table (TensorPart::embedding).
template <class Visit>
void for_each_embedding_tensor(const ModelConfig& c, Visit&& visit) {
  const std::uint64_t V = detail::u(c.vocab_size), E = detail::u(c.hidden_size);
  visit(
      Entry{std::string(tensor_names::kModel) + "embed_tokens.weight",
            {V, E},
            {},
            kFloat,
            DType::bf16,
            Form::matrix,
            TensorPart::embedding,
            0},
      [](auto& g) -> auto& { return g.embed_tokens; });
}

/// The output head (TensorPart::head): final norm, output AttnRes, lm_head.
template <class Visit>
void for_each_head_tensor(const ModelConfig& c, Visit&& visit) {
  const std::uint64_t V = detail::u(c.vocab_size), E = detail::u(c.hidden_size);
  const std::string m(tensor_names::kModel);
  auto add = [&](std::string name, Form form, Shape shape, auto field) {
    visit(Entry{std::move(name), std::move(shape), {}, kFloat, DType::bf16, form, TensorPart::head, 0}, field);
  };
  add(
      m + "norm.weight", Form::vector, {E}, [](auto& g) -> auto& { return g.norm; });
  add(
      m + "output_attn_res_norm.weight", Form::vector, {E}, [](auto& g) -> auto& { return g.out_res_norm; });
  add(
      m + "output_attn_res_proj.weight", Form::vector, {1, E}, [](auto& g) -> auto& { return g.out_res_proj; });
  add(
      std::string(tensor_names::kLmHead), Form::matrix, {V, E}, [](auto& g) -> auto& { return g.lm_head; });
}

/// The checkpoint's record of `e`, checked: present, a dtype of e.dtypes, the shape (or the
/// alternative). UsageError naming the file and tensor otherwise.
const TensorInfo& require(const CheckpointIndex& index, const Entry& e);

/// The checkpoint's record of `name` in layer i's trunk part (checked as require() does).
/// UsageError when the table has no such tensor in that layer.
const TensorInfo& require_layer_tensor(const CheckpointIndex& index, const ModelConfig& c, std::int64_t i,
                                       std::string_view suffix);

/// The number of tensors the geometry declares, counted per kind of layer (MLA or KDA, dense
/// or MoE) from one layer of each kind: no walk over every layer or expert.
std::uint64_t declared_tensor_count(const ModelConfig& c);

/// Checks config.json against the checkpoint before anything proportional to the declared
/// geometry is built or planned: the checkpoint holds as many tensors as the geometry
/// declares, and the tensors of one layer of each kind, one routed expert, the embedding and
/// the head are there with their shapes and dtypes. A config.json that declares 16 million
/// experts (or a hidden size the shards do not have) is a UsageError at once.
void require_declared_geometry(const CheckpointIndex& index, const ModelConfig& c);

}  // namespace k3::table
