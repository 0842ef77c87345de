// The K3 geometry read from a checkpoint's config.json (docs/model-spec.md §1). Every number comes
// from the file; a missing or out-of-range required key is refused (UsageError, exit 2,
// naming the key and the file). Nothing here has a default.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <k3/storage.hpp>

namespace k3 {

class CheckpointIndex;

struct ModelConfig {
  std::int64_t hidden_size = 0;  ///< E
  std::int64_t num_hidden_layers = 0;
  std::int64_t vocab_size = 0;
  double rms_norm_eps = 0;               ///< every RMSNorm except the two MLA-internal ones (1e-6)
  std::vector<std::int64_t> mla_layers;  ///< 0-based, sorted (config's full_attn_layers is 1-based)
  // KDA (linear_attn_config)
  std::int64_t kda_num_heads = 0;  ///< H
  std::int64_t kda_head_dim = 0;   ///< D (d_k = d_v)
  std::int64_t short_conv_kernel_size = 0;
  double gate_lower_bound = 0;  ///< -5.0 in K3
  // MLA
  std::int64_t num_attention_heads = 0;
  std::int64_t q_lora_rank = 0;
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
  bool mla_use_output_gate = false;
  // MoE
  std::int64_t num_experts = 0;
  std::int64_t num_experts_per_token = 0;
  std::int64_t num_shared_experts = 0;
  std::int64_t moe_intermediate_size = 0;      ///< I
  std::int64_t routed_expert_hidden_size = 0;  ///< L
  bool latent_moe_use_norm = false;
  bool moe_renormalize = false;
  double routed_scaling_factor = 0;
  std::int64_t first_k_dense_replace = 0;
  std::int64_t intermediate_size = 0;  ///< dense MLP width
  // AttnRes and activation
  std::int64_t attn_res_block_size = 0;
  double activation_situ_beta = 0;         ///< 4.0
  double activation_situ_linear_beta = 0;  ///< 25.0
  std::int64_t bos_token_id = 0;
  std::int64_t eos_token_id = 0;
  /// config.json carries `k3host_synthetic`: `k3host make-model` wrote this checkpoint with
  /// random weights (the demo), so its text is noise by design. Where the weights came from,
  /// not the model's shape: not part of the fingerprint.
  bool synthetic = false;
  /// XXH3-64 of the config.json text this was parsed from (parse_model_config; 0 for a
  /// geometry file): part of the checkpoint identity (k3/checkpoint.hpp), not of the
  /// fingerprint, which names the shape alone.
  std::uint64_t source_hash = 0;
  /// config.json's `k3host_thinking` (a boolean): false for a model that was not trained with
  /// K3's think channel (the shipped fortune models, trained on plain text), which `chat` and
  /// `serve` then answer with thinking off unless asked (docs/chat.md, "Thinking"). Absent:
  /// nullopt, read as true, as the released K3 thinks. Not part of the fingerprint.
  std::optional<bool> thinking;

  [[nodiscard]] bool is_mla(std::int64_t layer) const;  ///< 0-based layer index
  [[nodiscard]] bool is_dense(std::int64_t layer) const { return layer < first_k_dense_replace; }
  /// A stable 64-bit fingerprint of every field (for state files and traces).
  [[nodiscard]] std::uint64_t fingerprint() const;
};

/// Reads and validates config.json (nested text_config / linear_attn_config, or flat) of the
/// checkpoint at `checkpoint_uri` (a folder or a URL) through `storage`. Missing: UsageError
/// naming the file's URI.
ModelConfig read_model_config(sdk::StorageBackend& storage, const std::string& checkpoint_uri);

/// Validates the text of a config.json; `origin` names it in error messages.
ModelConfig parse_model_config(const std::string& json_text, const std::string& origin);


/// The checkpoint identity (docs/architecture.md, "Checkpoint identity"): 64 bits that name
/// a checkpoint's weights, not only its architecture. A hash of config.json's bytes
/// (`config.source_hash`, set by read_model_config) and `index.content_digest()`. Every file
/// derived from a checkpoint (a packed trunk, a state file, a trace) records it, and a run of
/// another checkpoint refuses the file, naming both identities.
[[nodiscard]] std::uint64_t checkpoint_identity(const ModelConfig& config, const CheckpointIndex& index);

}  // namespace k3
