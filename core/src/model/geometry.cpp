// Geometry files: configs/models/<name>.yaml → ModelGeometry. The model keys go through the
// same validator as config.json (model_config_from_tree); the YAML is stricter than a
// checkpoint's JSON in one way: a key we do not know is refused (typos in a geometry would
// otherwise silently fall back to nothing), with file:line:col.
#include <charconv>
#include <cstdlib>
#include <set>

#include <yaml-cpp/yaml.h>

#include <k3/data_dir.hpp>
#include <k3/error.hpp>
#include <k3/geometry.hpp>
#include <k3/user_files.hpp>

#include "model/model_config_tree.hpp"

namespace k3 {
namespace {

namespace fs = std::filesystem;

std::string where(const fs::path& file, const YAML::Node& n) {
  const auto m = n.Mark();
  if (m.is_null()) return file.string();
  return file.string() + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

// Plain scalars become integer / number / boolean; quoted scalars stay strings ("other").
detail::ConfigValue scalar_value(const YAML::Node& n, const std::string& at) {
  detail::ConfigValue v;
  v.where = at;
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return v;  // quoted
  if (s == "true" || s == "false") {
    v.type = detail::ConfigValue::Type::boolean;
    v.boolean = s == "true";
    return v;
  }
  const char* b = s.data();
  const char* e = s.data() + s.size();
  std::int64_t i = 0;
  if (auto r = std::from_chars(b, e, i); r.ec == std::errc() && r.ptr == e) {
    v.type = detail::ConfigValue::Type::integer;
    v.integer = i;
    v.number = static_cast<double>(i);
    return v;
  }
  double d = 0;
  if (auto r = std::from_chars(b, e, d); r.ec == std::errc() && r.ptr == e) {
    v.type = detail::ConfigValue::Type::number;
    v.number = d;
  }
  return v;
}

void flatten(const YAML::Node& n, const std::string& path, const fs::path& file, detail::ConfigTree& out) {
  const std::string at = where(file, n);
  if (n.IsMap()) {
    detail::ConfigValue obj;
    obj.type = detail::ConfigValue::Type::object;
    obj.where = at;
    if (!path.empty()) out[path] = obj;
    for (const auto& kv : n)
      flatten(kv.second, path.empty() ? kv.first.Scalar() : path + "." + kv.first.Scalar(), file, out);
    return;
  }
  if (n.IsSequence()) {
    detail::ConfigValue v;
    v.type = detail::ConfigValue::Type::int_list;
    v.where = at;
    for (const auto& item : n) {
      auto iv = item.IsScalar() ? scalar_value(item, at) : detail::ConfigValue{};
      if (iv.type != detail::ConfigValue::Type::integer) {
        v.type = detail::ConfigValue::Type::other;
        v.list.clear();
        break;
      }
      v.list.push_back(iv.integer);
    }
    out[path] = std::move(v);
    return;
  }
  if (n.IsScalar()) {
    out[path] = scalar_value(n, at);
    return;
  }
  detail::ConfigValue v;
  v.where = at;
  out[path] = v;
}

// Every key a geometry may hold (text_config keys are the §1 names).
const std::set<std::string>& known_keys() {
  static const std::set<std::string> keys = [] {
    std::set<std::string> k = {
        "description",  "text_config",       "text_config.linear_attn_config", "writer",
        "writer.seed",  "writer.shard_size", "writer.tokenizer_ranks",         "writer.headers_only_required",
        "writer.dtypes"};
    for (const char* lm : {"hidden_size",
                           "num_hidden_layers",
                           "vocab_size",
                           "rms_norm_eps",
                           "num_attention_heads",
                           "q_lora_rank",
                           "kv_lora_rank",
                           "qk_nope_head_dim",
                           "qk_rope_head_dim",
                           "v_head_dim",
                           "mla_use_output_gate",
                           "num_experts",
                           "num_experts_per_token",
                           "num_shared_experts",
                           "moe_intermediate_size",
                           "routed_expert_hidden_size",
                           "latent_moe_use_norm",
                           "moe_renormalize",
                           "routed_scaling_factor",
                           "first_k_dense_replace",
                           "intermediate_size",
                           "attn_res_block_size",
                           "activation_situ_beta",
                           "activation_situ_linear_beta",
                           "bos_token_id",
                           "eos_token_id"})
      k.insert(std::string("text_config.") + lm);
    for (const char* kda : {"full_attn_layers", "num_heads", "head_dim", "short_conv_kernel_size", "gate_lower_bound"})
      k.insert(std::string("text_config.linear_attn_config.") + kda);
    return k;
  }();
  return keys;
}

// "256KiB", "100MiB", "16GiB", "4096" → bytes.
bool parse_size(const std::string& s, std::uint64_t& out) {
  std::uint64_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || v == 0) return false;
  const std::string unit(r.ptr, s.data() + s.size());
  std::uint64_t mul = 0;
  if (unit.empty() || unit == "B")
    mul = 1;
  else if (unit == "KiB")
    mul = 1ull << 10;
  else if (unit == "MiB")
    mul = 1ull << 20;
  else if (unit == "GiB")
    mul = 1ull << 30;
  else
    return false;
  if (v > (~std::uint64_t{0}) / mul) return false;
  out = v * mul;
  return true;
}

const detail::ConfigValue& require(const detail::ConfigTree& t, const std::string& key, const fs::path& file) {
  auto it = t.find(key);
  if (it == t.end()) throw UsageError(file.string() + ": " + key + ": required key is missing");
  return it->second;
}

}  // namespace

fs::path find_geometry(const std::string& name_or_file) {
  const bool is_path = name_or_file.find('/') != std::string::npos || name_or_file.ends_with(".yaml") ||
                       name_or_file.ends_with(".yml");
  if (is_path) {
    if (!fs::is_regular_file(name_or_file)) throw UsageError(name_or_file + ": geometry file not found");
    return name_or_file;
  }
  if (name_or_file.empty()) throw UsageError("geometry: empty name");
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("K3_MODELS_DIR"); env && *env) dirs.emplace_back(env);
  dirs.emplace_back(data_path("configs/models"));
  std::string tried;
  for (const auto& d : dirs) {
    auto p = d / (name_or_file + ".yaml");
    if (fs::is_regular_file(p)) return p;
    tried += (tried.empty() ? "" : ", ") + p.string();
  }
  throw UsageError("geometry '" + name_or_file + "' not found (looked for " + tried + ")");
}

ModelGeometry load_geometry(const std::string& name_or_file) {
  ModelGeometry g;
  g.file = find_geometry(name_or_file);
  g.name = g.file.stem().string();
  const std::string text = read_user_file(g.file, "geometry", "geometry file", kMaxSmallYamlBytes);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw UsageError(g.file.string() + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                     ": " + e.msg);
  }
  if (!root.IsMap()) throw UsageError(g.file.string() + ": the geometry must be a YAML mapping");
  detail::ConfigTree tree;
  flatten(root, "", g.file, tree);
  for (const auto& [key, v] : tree)
    if (!known_keys().count(key)) throw UsageError(v.where + ": " + key + ": unknown key");
  if (!tree.count("text_config")) throw UsageError(g.file.string() + ": text_config: required section is missing");
  g.config = detail::model_config_from_tree(tree, g.file.string());

  const auto& seed = require(tree, "writer.seed", g.file);
  if (seed.type != detail::ConfigValue::Type::integer || seed.integer < 0)
    throw UsageError(seed.where + ": writer.seed: expected a non-negative integer");
  g.writer.seed = static_cast<std::uint64_t>(seed.integer);

  const auto& shard = require(tree, "writer.shard_size", g.file);
  const auto shard_node = root["writer"]["shard_size"];
  if (!shard_node.IsScalar() || !parse_size(shard_node.Scalar(), g.writer.shard_size_bytes))
    throw UsageError(shard.where + ": writer.shard_size: expected a size such as 4096, 256KiB, 100MiB or 16GiB");

  const auto& ranks = require(tree, "writer.tokenizer_ranks", g.file);
  if (ranks.type != detail::ConfigValue::Type::integer || ranks.integer < 256)
    throw UsageError(ranks.where + ": writer.tokenizer_ranks: expected an integer >= 256 (the single bytes)");
  g.writer.tokenizer_ranks = ranks.integer;

  if (auto it = tree.find("writer.headers_only_required"); it != tree.end()) {
    if (it->second.type != detail::ConfigValue::Type::boolean)
      throw UsageError(it->second.where + ": writer.headers_only_required: expected true or false");
    g.writer.headers_only_required = it->second.boolean;
  }
  if (tree.count("writer.dtypes")) {
    const auto node = root["writer"]["dtypes"];
    const std::string what = tree.at("writer.dtypes").where + ": writer.dtypes";
    if (!node.IsScalar()) throw UsageError(what + ": expected release, compact or f32");
    g.writer.dtypes = parse_dtype_mix(node.Scalar(), what);
  }

  // The tokenizer make-model writes decides three config numbers: refuse a geometry that
  // disagrees with it rather than write a checkpoint whose ids do not match its tokenizer.
  const auto& c = g.config;
  const auto r = g.writer.tokenizer_ranks;
  auto at = [&](const char* key) { return tree.at(std::string("text_config.") + key).where; };
  if (c.vocab_size != r + 256)
    throw UsageError(at("vocab_size") + ": text_config.vocab_size: must be writer.tokenizer_ranks + 256 = " +
                     std::to_string(r + 256) + " (256 added special slots)");
  if (c.bos_token_id != r)
    throw UsageError(at("bos_token_id") + ": text_config.bos_token_id: must be writer.tokenizer_ranks + 0 = " +
                     std::to_string(r) + " ([BOS])");
  if (c.eos_token_id != r + 2)
    throw UsageError(at("eos_token_id") + ": text_config.eos_token_id: must be writer.tokenizer_ranks + 2 = " +
                     std::to_string(r + 2) + " (<|end_of_msg|>)");
  return g;
}

}  // namespace k3
