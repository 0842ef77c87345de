// ModelConfig: validation of the config keys (docs/model-spec.md §1) and the fingerprint.
// Lookup rules (the released config is nested; a flat config with the same keys at the root
// is also valid, as the C99 reference engine kimi-k3-in-c reads it):
//   LM key k        nested: text_config.k, then the root k      flat: k
//   KDA key k       nested: text_config.linear_attn_config.k    flat: linear_attn_config.k,
//                   then the kda_-prefixed alias (kda_num_heads, kda_head_dim) or the plain
//                   key (short_conv_kernel_size, ...) beside the LM keys
// A missing required key is refused, never defaulted; all missing keys are named at once.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include <xxhash.h>

#include <k3/error.hpp>
#include <k3/model_config.hpp>

#include "io/checkpoint_identity.hpp"
#include "io/small_file.hpp"
#include "io/uri.hpp"
#include "model/model_config_tree.hpp"

namespace k3 {

bool ModelConfig::is_mla(std::int64_t layer) const {
  return std::binary_search(mla_layers.begin(), mla_layers.end(), layer);
}

namespace {

// Little-endian serialisation of every field, so the fingerprint is the same on every host.
class FingerprintWriter {
 public:
  void add(std::int64_t v) {
    auto u = static_cast<std::uint64_t>(v);
    for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<unsigned char>(u >> (8 * i)));
  }
  void add(double v) { add(std::bit_cast<std::int64_t>(v)); }
  void add(bool v) { bytes_.push_back(v ? 1 : 0); }
  [[nodiscard]] std::uint64_t hash() const { return XXH64(bytes_.data(), bytes_.size(), 0x4b33u); }

 private:
  std::vector<unsigned char> bytes_;
};

}  // namespace

std::uint64_t ModelConfig::fingerprint() const {
  FingerprintWriter w;
  w.add(hidden_size);
  w.add(num_hidden_layers);
  w.add(vocab_size);
  w.add(rms_norm_eps);
  w.add(static_cast<std::int64_t>(mla_layers.size()));
  for (auto l : mla_layers) w.add(l);
  w.add(kda_num_heads);
  w.add(kda_head_dim);
  w.add(short_conv_kernel_size);
  w.add(gate_lower_bound);
  w.add(num_attention_heads);
  w.add(q_lora_rank);
  w.add(kv_lora_rank);
  w.add(qk_nope_head_dim);
  w.add(qk_rope_head_dim);
  w.add(v_head_dim);
  w.add(mla_use_output_gate);
  w.add(num_experts);
  w.add(num_experts_per_token);
  w.add(num_shared_experts);
  w.add(moe_intermediate_size);
  w.add(routed_expert_hidden_size);
  w.add(latent_moe_use_norm);
  w.add(moe_renormalize);
  w.add(routed_scaling_factor);
  w.add(first_k_dense_replace);
  w.add(intermediate_size);
  w.add(attn_res_block_size);
  w.add(activation_situ_beta);
  w.add(activation_situ_linear_beta);
  w.add(bos_token_id);
  w.add(eos_token_id);
  return w.hash();
}

namespace detail {
namespace {

// Finds keys by the lookup rules above and collects what is missing or wrong.
class KeyReader {
 public:
  KeyReader(const ConfigTree& tree, std::string file) : tree_(tree), file_(std::move(file)) {
    auto it = tree_.find("text_config");
    nested_ = it != tree_.end() && it->second.type == ConfigValue::Type::object;
    lm_ = nested_ ? "text_config." : "";
    kda_ = lm_ + "linear_attn_config.";
  }

  [[nodiscard]] bool nested() const { return nested_; }

  /// Candidate paths for an LM key, primary first.
  [[nodiscard]] std::vector<std::string> lm(const std::string& key) const {
    if (nested_) return {lm_ + key, key};
    return {key};
  }
  /// Candidate paths for a KDA key, primary first.
  [[nodiscard]] std::vector<std::string> kda(const std::string& key, const std::string& alias) const {
    return {kda_ + key, lm_ + alias};
  }

  std::int64_t integer(const std::vector<std::string>& paths) {
    const auto* v = find(paths);
    if (!v) return 0;
    if (v->type != ConfigValue::Type::integer) return wrong_type(*v, paths, "an integer"), 0;
    return v->integer;
  }
  double number(const std::vector<std::string>& paths) {
    const auto* v = find(paths);
    if (!v) return 0;
    if (v->type != ConfigValue::Type::integer && v->type != ConfigValue::Type::number)
      return wrong_type(*v, paths, "a number"), 0;
    if (!std::isfinite(v->number)) return wrong_type(*v, paths, "a finite number"), 0;
    return v->number;
  }
  bool boolean(const std::vector<std::string>& paths) {
    const auto* v = find(paths);
    if (!v) return false;
    if (v->type == ConfigValue::Type::boolean) return v->boolean;
    if (v->type == ConfigValue::Type::integer && (v->integer == 0 || v->integer == 1)) return v->integer == 1;
    return wrong_type(*v, paths, "true or false"), false;
  }
  std::vector<std::int64_t> int_list(const std::vector<std::string>& paths) {
    const auto* v = find(paths);
    if (!v) return {};
    if (v->type != ConfigValue::Type::int_list)
      return wrong_type(*v, paths, "a list of integers"), std::vector<std::int64_t>{};
    return v->list;
  }

  /// Refuses with every missing key at once, or the first wrong type.
  void throw_if_failed() const {
    if (!missing_.empty()) {
      std::string msg = file_ + ": " + missing_.front() + ": required key is missing (no default is substituted)";
      if (missing_.size() > 1) {
        msg += "; also missing:";
        for (std::size_t i = 1; i < missing_.size(); ++i) msg += (i > 1 ? ", " : " ") + missing_[i];
      }
      throw UsageError(msg);
    }
    if (!wrong_.empty()) throw UsageError(wrong_);
  }

  /// A range/consistency refusal naming the key where it was found.
  [[noreturn]] void refuse(const std::vector<std::string>& paths, const std::string& what) const {
    const auto* v = lookup(paths);
    std::string where = v ? v->where : file_;
    std::string path = v ? found_path(paths) : paths.front();
    throw UsageError(where + ": " + path + ": " + what);
  }

 private:
  const ConfigValue* lookup(const std::vector<std::string>& paths) const {
    for (const auto& p : paths) {
      auto it = tree_.find(p);
      if (it != tree_.end()) return &it->second;
    }
    return nullptr;
  }
  std::string found_path(const std::vector<std::string>& paths) const {
    for (const auto& p : paths)
      if (tree_.count(p)) return p;
    return paths.front();
  }
  const ConfigValue* find(const std::vector<std::string>& paths) {
    const auto* v = lookup(paths);
    if (!v) missing_.push_back(paths.front());
    return v;
  }
  void wrong_type(const ConfigValue& v, const std::vector<std::string>& paths, const char* expected) {
    if (wrong_.empty()) wrong_ = v.where + ": " + found_path(paths) + ": expected " + expected;
  }

  const ConfigTree& tree_;
  std::string file_;
  bool nested_ = false;
  std::string lm_, kda_;
  std::vector<std::string> missing_;
  std::string wrong_;
};

std::string str(std::int64_t v) { return std::to_string(v); }

}  // namespace

ModelConfig model_config_from_tree(const ConfigTree& tree, const std::string& file) {
  KeyReader r(tree, file);
  ModelConfig c;
  const auto k_hidden = r.lm("hidden_size"), k_layers = r.lm("num_hidden_layers"), k_vocab = r.lm("vocab_size"),
             k_eps = r.lm("rms_norm_eps"), k_map = r.kda("full_attn_layers", "full_attn_layers"),
             k_kh = r.kda("num_heads", "kda_num_heads"), k_kd = r.kda("head_dim", "kda_head_dim"),
             k_conv = r.kda("short_conv_kernel_size", "short_conv_kernel_size"),
             k_glb = r.kda("gate_lower_bound", "gate_lower_bound"), k_heads = r.lm("num_attention_heads"),
             k_qlora = r.lm("q_lora_rank"), k_kvlora = r.lm("kv_lora_rank"), k_nope = r.lm("qk_nope_head_dim"),
             k_rope = r.lm("qk_rope_head_dim"), k_v = r.lm("v_head_dim"), k_gate = r.lm("mla_use_output_gate"),
             k_nexp = r.lm("num_experts"), k_topk = r.lm("num_experts_per_token"),
             k_nshared = r.lm("num_shared_experts"), k_I = r.lm("moe_intermediate_size"),
             k_L = r.lm("routed_expert_hidden_size"), k_lnorm = r.lm("latent_moe_use_norm"),
             k_renorm = r.lm("moe_renormalize"), k_scale = r.lm("routed_scaling_factor"),
             k_dense = r.lm("first_k_dense_replace"), k_dI = r.lm("intermediate_size"),
             k_block = r.lm("attn_res_block_size"), k_b1 = r.lm("activation_situ_beta"),
             k_b2 = r.lm("activation_situ_linear_beta"), k_bos = r.lm("bos_token_id"), k_eos = r.lm("eos_token_id");

  c.hidden_size = r.integer(k_hidden);
  c.num_hidden_layers = r.integer(k_layers);
  c.vocab_size = r.integer(k_vocab);
  c.rms_norm_eps = r.number(k_eps);
  const auto full_attn_layers = r.int_list(k_map);  // 1-based
  c.kda_num_heads = r.integer(k_kh);
  c.kda_head_dim = r.integer(k_kd);
  c.short_conv_kernel_size = r.integer(k_conv);
  c.gate_lower_bound = r.number(k_glb);
  c.num_attention_heads = r.integer(k_heads);
  c.q_lora_rank = r.integer(k_qlora);
  c.kv_lora_rank = r.integer(k_kvlora);
  c.qk_nope_head_dim = r.integer(k_nope);
  c.qk_rope_head_dim = r.integer(k_rope);
  c.v_head_dim = r.integer(k_v);
  c.mla_use_output_gate = r.boolean(k_gate);
  c.num_experts = r.integer(k_nexp);
  c.num_experts_per_token = r.integer(k_topk);
  c.num_shared_experts = r.integer(k_nshared);
  c.moe_intermediate_size = r.integer(k_I);
  c.routed_expert_hidden_size = r.integer(k_L);
  c.latent_moe_use_norm = r.boolean(k_lnorm);
  c.moe_renormalize = r.boolean(k_renorm);
  c.routed_scaling_factor = r.number(k_scale);
  c.first_k_dense_replace = r.integer(k_dense);
  c.intermediate_size = r.integer(k_dI);
  c.attn_res_block_size = r.integer(k_block);
  c.activation_situ_beta = r.number(k_b1);
  c.activation_situ_linear_beta = r.number(k_b2);
  c.bos_token_id = r.integer(k_bos);
  c.eos_token_id = r.integer(k_eos);
  r.throw_if_failed();

  // Sizes: positive (a size of 0 would make an empty matrix the forward pass cannot use),
  // and below a bound that keeps every product of two of them far from int64 overflow.
  constexpr std::int64_t kMaxDim = std::int64_t{1} << 24;
  auto positive = [&](const std::vector<std::string>& key, std::int64_t v) {
    if (v <= 0 || v > kMaxDim) r.refuse(key, "must be in 1.." + str(kMaxDim) + " (got " + str(v) + ")");
  };
  positive(k_hidden, c.hidden_size);
  positive(k_layers, c.num_hidden_layers);
  positive(k_vocab, c.vocab_size);
  positive(k_kh, c.kda_num_heads);
  positive(k_kd, c.kda_head_dim);
  positive(k_conv, c.short_conv_kernel_size);
  positive(k_heads, c.num_attention_heads);
  positive(k_qlora, c.q_lora_rank);
  positive(k_kvlora, c.kv_lora_rank);
  positive(k_nope, c.qk_nope_head_dim);
  positive(k_v, c.v_head_dim);
  positive(k_nexp, c.num_experts);
  positive(k_topk, c.num_experts_per_token);
  positive(k_nshared, c.num_shared_experts);
  positive(k_I, c.moe_intermediate_size);
  positive(k_L, c.routed_expert_hidden_size);
  positive(k_block, c.attn_res_block_size);
  if (c.qk_rope_head_dim < 0 || c.qk_rope_head_dim > kMaxDim)
    r.refuse(k_rope, "must be in 0.." + str(kMaxDim) + " (got " + str(c.qk_rope_head_dim) + ")");
  if (!(c.rms_norm_eps > 0 && c.rms_norm_eps < 1)) r.refuse(k_eps, "must be in (0, 1)");
  if (!(c.gate_lower_bound < 0)) r.refuse(k_glb, "must be negative (the KDA decay is bounded below by it)");
  if (!(c.routed_scaling_factor > 0)) r.refuse(k_scale, "must be positive");
  if (!(c.activation_situ_beta > 0)) r.refuse(k_b1, "must be positive");
  if (!(c.activation_situ_linear_beta > 0)) r.refuse(k_b2, "must be positive");

  // A_log is stored padded to head_dim and only the first H entries are used.
  if (c.kda_num_heads > c.kda_head_dim)
    r.refuse(k_kh, "KDA heads (" + str(c.kda_num_heads) + ") exceed head_dim (" + str(c.kda_head_dim) +
                       "): A_log is stored as [head_dim] and holds one entry per head");
  if (c.num_experts_per_token > c.num_experts)
    r.refuse(k_topk, "top-k " + str(c.num_experts_per_token) + " exceeds num_experts " + str(c.num_experts));
  // MXFP4 groups of 32 run along each expert matrix's columns: L for w1/w3, I for w2.
  if (c.moe_intermediate_size % 32 != 0)
    r.refuse(k_I, "must be a multiple of 32 (MXFP4 group size; w2 has I columns), got " + str(c.moe_intermediate_size));
  if (c.routed_expert_hidden_size % 32 != 0)
    r.refuse(k_L, "must be a multiple of 32 (MXFP4 group size; w1/w3 have L columns), got " +
                      str(c.routed_expert_hidden_size));
  if (c.first_k_dense_replace < 0 || c.first_k_dense_replace > c.num_hidden_layers)
    r.refuse(k_dense,
             "must be in 0..num_hidden_layers (" + str(c.num_hidden_layers) + "), got " + str(c.first_k_dense_replace));
  if (c.first_k_dense_replace > 0) positive(k_dI, c.intermediate_size);
  if (c.bos_token_id < 0 || c.bos_token_id >= c.vocab_size)
    r.refuse(k_bos, "token id " + str(c.bos_token_id) + " outside the vocabulary 0.." + str(c.vocab_size - 1));
  if (c.eos_token_id < 0 || c.eos_token_id >= c.vocab_size)
    r.refuse(k_eos, "token id " + str(c.eos_token_id) + " outside the vocabulary 0.." + str(c.vocab_size - 1));

  // The layer map: 1-based on disk, 0-based here; never derived from a pattern.
  if (full_attn_layers.empty()) r.refuse(k_map, "is empty (it lists the MLA layers, 1-based)");
  for (auto l1 : full_attn_layers) {
    if (l1 < 1 || l1 > c.num_hidden_layers)
      r.refuse(k_map, "layer " + str(l1) + " outside 1.." + str(c.num_hidden_layers) + " (the list is 1-based)");
    c.mla_layers.push_back(l1 - 1);
  }
  std::sort(c.mla_layers.begin(), c.mla_layers.end());
  if (std::adjacent_find(c.mla_layers.begin(), c.mla_layers.end()) != c.mla_layers.end())
    r.refuse(k_map, "lists a layer twice");
  if (static_cast<std::int64_t>(c.mla_layers.size()) >= c.num_hidden_layers)
    r.refuse(k_map, "makes every layer MLA; at least one KDA layer is required");
  return c;
}

}  // namespace detail

ModelConfig parse_model_config(const std::string& json_text, const std::string& origin) {
  auto tree = detail::config_tree_from_json(json_text, origin);
  ModelConfig c = detail::model_config_from_tree(tree, origin);
  c.synthetic = tree.count("k3host_synthetic") != 0;
  c.source_hash = XXH3_64bits(json_text.data(), json_text.size());
  if (const auto it = tree.find("k3host_thinking"); it != tree.end()) {
    if (it->second.type != detail::ConfigValue::Type::boolean)
      throw UsageError(origin +
                       ": k3host_thinking must be true or false (whether the model was trained with K3's "
                       "think channel)");
    c.thinking = it->second.boolean;
  }
  return c;
}

ModelConfig read_model_config(sdk::StorageBackend& storage, const std::string& checkpoint_uri) {
  const std::string uri = io::join_uri(checkpoint_uri, "config.json");
  const simdjson::padded_string text = io::read_small_file(storage, uri, io::kMaxConfigJson, "the model config");
  return parse_model_config(std::string(text.data(), text.size()), uri);
}

std::uint64_t checkpoint_identity(const ModelConfig& config, const CheckpointIndex& index) {
  return io::identity_of(config.source_hash, index.content_digest());
}

}  // namespace k3
