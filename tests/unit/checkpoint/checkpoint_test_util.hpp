// Helpers for the checkpoint tests: the expected tensor inventory written straight from
// docs/model-spec.md §2 (independently of core's geometry_layout.cpp), scratch directories, and
// raw shard editing for the corrupt-input tests.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <k3/checkpoint.hpp>
#include <k3/model_config.hpp>

#include "test_models.hpp"

namespace k3::test {

struct Expected {
  DType dtype;
  std::vector<std::uint64_t> shape;
};

/// Every tensor of docs/model-spec.md §2 for config c, typed out from the spec text.
inline std::map<std::string, Expected> spec_inventory(const ModelConfig& c) {
  using U = std::uint64_t;
  std::map<std::string, Expected> m;
  const U E = static_cast<U>(c.hidden_size), V = static_cast<U>(c.vocab_size);
  const std::string pre = "language_model.model.";
  m[pre + "embed_tokens.weight"] = {DType::bf16, {V, E}};
  m[pre + "norm.weight"] = {DType::bf16, {E}};
  m[pre + "output_attn_res_norm.weight"] = {DType::bf16, {E}};
  m[pre + "output_attn_res_proj.weight"] = {DType::bf16, {1, E}};
  m["language_model.lm_head.weight"] = {DType::bf16, {V, E}};
  std::vector<bool> mla(static_cast<std::size_t>(c.num_hidden_layers), false);
  for (auto l : c.mla_layers) mla[static_cast<std::size_t>(l)] = true;
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = pre + "layers." + std::to_string(i) + ".";
    for (const char* n : {"input_layernorm.weight", "post_attention_layernorm.weight", "self_attention_res_norm.weight",
                          "mlp_res_norm.weight"})
      m[p + n] = {DType::bf16, {E}};
    m[p + "self_attention_res_proj.weight"] = {DType::bf16, {1, E}};
    m[p + "mlp_res_proj.weight"] = {DType::bf16, {1, E}};
    const std::string a = p + "self_attn.";
    if (!mla[static_cast<std::size_t>(i)]) {
      const U H = static_cast<U>(c.kda_num_heads), D = static_cast<U>(c.kda_head_dim);
      for (const char* n : {"q_proj", "k_proj", "v_proj", "g_proj"}) m[a + n + ".weight"] = {DType::bf16, {H * D, E}};
      for (const char* n : {"q_conv1d", "k_conv1d", "v_conv1d"})
        m[a + n + ".weight"] = {DType::f32, {H * D, 1, static_cast<U>(c.short_conv_kernel_size)}};
      m[a + "f_a_proj.weight"] = {DType::bf16, {D, E}};
      m[a + "f_b_proj.weight"] = {DType::bf16, {H * D, D}};
      m[a + "b_proj.weight"] = {DType::bf16, {H, E}};
      m[a + "o_proj.weight"] = {DType::bf16, {E, H * D}};
      m[a + "A_log"] = {DType::f32, {D}};  // padded to D as released
      m[a + "dt_bias"] = {DType::f32, {H * D}};
      m[a + "o_norm.weight"] = {DType::f32, {D}};  // F32 in the release
    } else {
      const U H = static_cast<U>(c.num_attention_heads), ql = static_cast<U>(c.q_lora_rank);
      const U kvl = static_cast<U>(c.kv_lora_rank), nope = static_cast<U>(c.qk_nope_head_dim);
      const U rope = static_cast<U>(c.qk_rope_head_dim), v = static_cast<U>(c.v_head_dim);
      m[a + "q_a_proj.weight"] = {DType::bf16, {ql, E}};
      m[a + "q_a_layernorm.weight"] = {DType::bf16, {ql}};
      m[a + "q_b_proj.weight"] = {DType::bf16, {H * (nope + rope), ql}};
      m[a + "kv_a_proj_with_mqa.weight"] = {DType::bf16, {kvl + rope, E}};
      m[a + "kv_a_layernorm.weight"] = {DType::bf16, {kvl}};
      m[a + "kv_b_proj.weight"] = {DType::bf16, {H * (nope + v), kvl}};
      m[a + "g_proj.weight"] = {DType::bf16, {H * v, E}};
      m[a + "o_proj.weight"] = {DType::bf16, {E, H * v}};
    }
    if (i < c.first_k_dense_replace) {
      const U I = static_cast<U>(c.intermediate_size);
      m[p + "mlp.gate_proj.weight"] = {DType::bf16, {I, E}};
      m[p + "mlp.up_proj.weight"] = {DType::bf16, {I, E}};
      m[p + "mlp.down_proj.weight"] = {DType::bf16, {E, I}};
    } else {
      const U N = static_cast<U>(c.num_experts), L = static_cast<U>(c.routed_expert_hidden_size);
      const U I = static_cast<U>(c.moe_intermediate_size), S = I * static_cast<U>(c.num_shared_experts);
      const std::string b = p + "block_sparse_moe.";
      m[b + "gate.weight"] = {DType::bf16, {N, E}};
      m[b + "gate.e_score_correction_bias"] = {DType::f32, {N}};
      m[b + "routed_expert_down_proj.weight"] = {DType::bf16, {L, E}};
      m[b + "routed_expert_norm.weight"] = {DType::bf16, {L}};
      m[b + "routed_expert_up_proj.weight"] = {DType::bf16, {E, L}};
      m[b + "shared_experts.gate_proj.weight"] = {DType::bf16, {S, E}};
      m[b + "shared_experts.up_proj.weight"] = {DType::bf16, {S, E}};
      m[b + "shared_experts.down_proj.weight"] = {DType::bf16, {E, S}};
      for (U e = 0; e < N; ++e) {
        const std::string x = b + "experts." + std::to_string(e) + ".";
        // w1, w3 logical [I, L]; w2 logical [L, I]; packed [rows, cols/2], scale [rows, cols/32]
        m[x + "w1.weight_packed"] = {DType::u8, {I, L / 2}};
        m[x + "w1.weight_scale"] = {DType::u8, {I, L / 32}};
        m[x + "w3.weight_packed"] = {DType::u8, {I, L / 2}};
        m[x + "w3.weight_scale"] = {DType::u8, {I, L / 32}};
        m[x + "w2.weight_packed"] = {DType::u8, {L, I / 2}};
        m[x + "w2.weight_scale"] = {DType::u8, {L, I / 32}};
      }
    }
  }
  return m;
}

/// A fresh empty directory under this process's scratch directory.
inline std::filesystem::path fresh_dir(const std::string& name) {
  static int counter = 0;
  auto d = scratch_dir() / (name + "-" + std::to_string(++counter));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

/// A shard split into its header JSON and its data bytes.
struct RawShard {
  std::string json;
  std::string data;
};

inline RawShard read_shard(const std::filesystem::path& p) {
  const std::string all = read_file(p);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(all[static_cast<std::size_t>(i)]);
  return {all.substr(8, n), all.substr(8 + n)};
}

inline void write_shard(const std::filesystem::path& p, const RawShard& s) {
  std::string out(8, '\0');
  const std::uint64_t n = s.json.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  write_file(p, out + s.json + s.data);
}

/// Replaces the first occurrence of `from` (which must exist) by `to`.
inline std::string replace_once(std::string s, const std::string& from, const std::string& to) {
  const auto pos = s.find(from);
  if (pos == std::string::npos) throw std::runtime_error("replace_once: '" + from + "' not found");
  return s.replace(pos, from.size(), to);
}

inline std::vector<std::filesystem::path> shard_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> v;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace k3::test
