// config.json in the released shape: top-level model_type/architectures and token ids,
// `text_config` with every language-model key, `text_config.linear_attn_config` with the
// KDA keys and the 1-based layer map, and the MXFP4 quantization_config of the release.
#include <charconv>

#include "synth/make_model_parts.hpp"

namespace k3::detail {
namespace {

// Shortest round-trip form; a whole number keeps a ".0" so it reads back as a JSON float.
std::string num(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string list(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

const char* boolean(bool b) { return b ? "true" : "false"; }

}  // namespace

std::string make_config_json(const ModelGeometry& g, std::uint64_t seed, bool headers_only) {
  const ModelConfig& c = g.config;
  std::vector<std::int64_t> full, kda;  // 1-based, as released
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) (c.is_mla(i) ? full : kda).push_back(i + 1);
  const std::int64_t pad = c.vocab_size - 1;  // [PAD] is the last special slot
  auto I = [](std::int64_t v) { return std::to_string(v); };

  std::string j = "{\n";
  j += "  \"architectures\": [\"KimiK3ForConditionalGeneration\"],\n";
  j += "  \"model_type\": \"kimi_k3\",\n";
  j += "  \"bos_token_id\": " + I(c.bos_token_id) + ",\n";
  j += "  \"eos_token_id\": " + I(c.eos_token_id) + ",\n";
  j += "  \"pad_token_id\": " + I(pad) + ",\n";
  j += "  \"tie_word_embeddings\": false,\n";
  j += "  \"torch_dtype\": \"bfloat16\",\n";
  j += "  \"k3host_synthetic\": {\"geometry\": \"" + g.name + "\", \"seed\": " + std::to_string(seed) +
       ", \"headers_only\": " + std::string(boolean(headers_only)) +
       ", \"note\": \"synthetic weights written by k3host make-model\"},\n";
  j += "  \"text_config\": {\n";
  j += "    \"architectures\": [\"KimiLinearForCausalLM\"],\n";
  j += "    \"model_type\": \"kimi_linear\",\n";
  j += "    \"hidden_size\": " + I(c.hidden_size) + ",\n";
  j += "    \"num_hidden_layers\": " + I(c.num_hidden_layers) + ",\n";
  j += "    \"vocab_size\": " + I(c.vocab_size) + ",\n";
  j += "    \"rms_norm_eps\": " + num(c.rms_norm_eps) + ",\n";
  j += "    \"linear_attn_config\": {\n";
  j += "      \"full_attn_layers\": " + list(full) + ",\n";
  j += "      \"kda_layers\": " + list(kda) + ",\n";
  j += "      \"num_heads\": " + I(c.kda_num_heads) + ",\n";
  j += "      \"head_dim\": " + I(c.kda_head_dim) + ",\n";
  j += "      \"short_conv_kernel_size\": " + I(c.short_conv_kernel_size) + ",\n";
  j += "      \"gate_lower_bound\": " + num(c.gate_lower_bound) + ",\n";
  j += "      \"use_full_rank_gate\": true\n";
  j += "    },\n";
  j += "    \"num_attention_heads\": " + I(c.num_attention_heads) + ",\n";
  j += "    \"num_key_value_heads\": " + I(c.num_attention_heads) + ",\n";
  j += "    \"q_lora_rank\": " + I(c.q_lora_rank) + ",\n";
  j += "    \"kv_lora_rank\": " + I(c.kv_lora_rank) + ",\n";
  j += "    \"qk_nope_head_dim\": " + I(c.qk_nope_head_dim) + ",\n";
  j += "    \"qk_rope_head_dim\": " + I(c.qk_rope_head_dim) + ",\n";
  j += "    \"v_head_dim\": " + I(c.v_head_dim) + ",\n";
  j += "    \"mla_use_nope\": true,\n";
  j += "    \"mla_use_output_gate\": " + std::string(boolean(c.mla_use_output_gate)) + ",\n";
  j += "    \"num_experts\": " + I(c.num_experts) + ",\n";
  j += "    \"num_experts_per_token\": " + I(c.num_experts_per_token) + ",\n";
  j += "    \"num_shared_experts\": " + I(c.num_shared_experts) + ",\n";
  j += "    \"moe_intermediate_size\": " + I(c.moe_intermediate_size) + ",\n";
  j += "    \"routed_expert_hidden_size\": " + I(c.routed_expert_hidden_size) + ",\n";
  j += "    \"latent_moe_use_norm\": " + std::string(boolean(c.latent_moe_use_norm)) + ",\n";
  j += "    \"moe_renormalize\": " + std::string(boolean(c.moe_renormalize)) + ",\n";
  j += "    \"routed_scaling_factor\": " + num(c.routed_scaling_factor) + ",\n";
  j += "    \"moe_router_activation_func\": \"sigmoid\",\n";
  j += "    \"topk_method\": \"noaux_tc\",\n";
  j += "    \"use_grouped_topk\": true,\n";
  j += "    \"num_expert_group\": 1,\n";
  j += "    \"topk_group\": 1,\n";
  j += "    \"moe_layer_freq\": 1,\n";
  j += "    \"first_k_dense_replace\": " + I(c.first_k_dense_replace) + ",\n";
  j += "    \"intermediate_size\": " + I(c.intermediate_size) + ",\n";
  j += "    \"attn_res_block_size\": " + I(c.attn_res_block_size) + ",\n";
  j += "    \"hidden_act\": \"situ\",\n";
  j += "    \"activation_situ_beta\": " + num(c.activation_situ_beta) + ",\n";
  j += "    \"activation_situ_linear_beta\": " + num(c.activation_situ_linear_beta) + ",\n";
  j += "    \"num_nextn_predict_layers\": 0,\n";
  j += "    \"max_position_embeddings\": 1048576,\n";
  j += "    \"tie_word_embeddings\": false,\n";
  j += "    \"bos_token_id\": " + I(c.bos_token_id) + ",\n";
  j += "    \"eos_token_id\": " + I(c.eos_token_id) + ",\n";
  j += "    \"pad_token_id\": " + I(pad) + ",\n";
  j += "    \"quantization_config\": {\n";
  j += "      \"quant_method\": \"compressed-tensors\",\n";
  j += "      \"format\": \"mxfp4-pack-quantized\",\n";
  j += "      \"config_groups\": {\"group_0\": {\"targets\": [\"Linear\"], \"input_activations\": null,\n";
  j += "        \"weights\": {\"num_bits\": 4, \"type\": \"float\", \"symmetric\": true, \"strategy\": \"group\",\n";
  j += "                    \"group_size\": 32, \"scale_dtype\": \"torch.uint8\"}}},\n";
  j += "      \"ignore\": [\"re:.*self_attn.*\", \"re:.*shared_experts.*\", "
       "\"re:.*mlp\\\\.(gate|up|gate_up|down)_proj.*\",\n";
  j += "                 \"re:.*lm_head.*\", \"re:.*vision_tower.*\", \"re:.*mm_projector.*\"]\n";
  j += "    }\n";
  j += "  }\n";
  j += "}\n";
  return j;
}

}  // namespace k3::detail
