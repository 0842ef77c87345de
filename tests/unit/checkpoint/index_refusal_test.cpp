// Bad input: each corrupted copy of the tiny checkpoint is refused by CheckpointIndex::open
// (or read_model_config) with a UsageError (exit 2) naming the file and the tensor or key.
#include <catch2/catch.hpp>

#include <k3/checkpoint.hpp>
#include <k3/error.hpp>
#include <k3/model_config.hpp>

#include "checkpoint_test_util.hpp"
#include "local_storage.hpp"

namespace fs = std::filesystem;
using namespace k3;
using namespace k3::test;

namespace {

// A private copy of the tiny checkpoint to corrupt.
fs::path tiny_copy(const std::string& tag) {
  const fs::path dir = fresh_dir(tag) / "model";
  fs::copy(test_model("tiny"), dir, fs::copy_options::recursive);
  return dir;
}

// The refusal message of opening `dir` (fails the test when it opens).
std::string refusal(const fs::path& dir) {
  try {
    (void)k3::test::open_index(dir);
  } catch (const UsageError& e) {
    CHECK(e.code() == ExitCode::usage);
    return e.what();
  }
  FAIL("the corrupted checkpoint was accepted");
  return {};
}

std::string config_refusal(const fs::path& config) {
  try {
    (void)k3::test::read_config(config.parent_path());
  } catch (const UsageError& e) {
    return e.what();
  }
  FAIL("the corrupted config was accepted");
  return {};
}

// The name of the last tensor in a shard's data order (the one a truncation cuts).
std::string first_tensor_after_metadata(const std::string& json) {
  const auto meta_end = json.find("}") + 1;  // end of {"__metadata__":{...}
  const auto q1 = json.find('"', meta_end);
  const auto q2 = json.find('"', q1 + 1);
  return json.substr(q1 + 1, q2 - q1 - 1);
}

}  // namespace

TEST_CASE("the untouched tiny checkpoint opens", "[index]") {
  const auto index = k3::test::open_index(test_model("tiny"));
  CHECK(index.tensors().size() == spec_inventory(k3::test::read_config(test_model("tiny"))).size());
}

TEST_CASE("a truncated shard is refused naming the shard and the tensor past EOF", "[index][bad_input]") {
  const fs::path dir = tiny_copy("truncated");
  const fs::path shard = shard_files(dir).back();
  // The last tensor of the last shard is the lm_head; cut its final byte off.
  fs::resize_file(shard, fs::file_size(shard) - 1);
  const auto msg = refusal(dir);
  CHECK_THAT(msg, Catch::Contains(shard.string()) && Catch::Contains("language_model.lm_head.weight") &&
                      Catch::Contains("past the end"));
}

TEST_CASE("a header length past EOF is refused", "[index][bad_input]") {
  const fs::path dir = tiny_copy("hlen");
  const fs::path shard = shard_files(dir).front();
  std::string bytes = read_file(shard);
  const std::uint64_t bogus = bytes.size();  // 8 + this > file size
  for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>((bogus >> (8 * i)) & 0xff);
  write_file(shard, bytes);
  CHECK_THAT(refusal(dir), Catch::Contains(shard.string()) && Catch::Contains("header length"));
}

TEST_CASE("a file shorter than the length prefix is refused", "[index][bad_input]") {
  const fs::path dir = tiny_copy("short");
  const fs::path shard = shard_files(dir).front();
  write_file(shard, "abcd");
  CHECK_THAT(refusal(dir), Catch::Contains(shard.string()) && Catch::Contains("too short"));
}

TEST_CASE("header JSON that does not parse is refused", "[index][bad_input]") {
  const fs::path dir = tiny_copy("badjson");
  const fs::path shard = shard_files(dir)[1];
  auto s = read_shard(shard);
  s.json = replace_once(s.json, "\"data_offsets\":[", "\"data_offsets\":[[");
  write_shard(shard, s);
  CHECK_THAT(refusal(dir), Catch::Contains(shard.string()));
  // The top level must be an object.
  auto s2 = read_shard(shard);
  s2.json = "[" + s2.json.substr(1);
  write_shard(shard, s2);
  CHECK_THAT(refusal(dir), Catch::Contains(shard.string()) && Catch::Contains("JSON"));
}

TEST_CASE("an unknown dtype is refused naming the tensor", "[index][bad_input]") {
  const fs::path dir = tiny_copy("dtype");
  const fs::path shard = shard_files(dir)[1];
  auto s = read_shard(shard);
  const std::string victim = first_tensor_after_metadata(s.json);
  s.json = replace_once(s.json, "\"dtype\":\"BF16\"", "\"dtype\":\"BF17\"");
  write_shard(shard, s);
  CHECK_THAT(refusal(dir), Catch::Contains(shard.string()) && Catch::Contains("'" + victim + "'") &&
                               Catch::Contains("unknown dtype 'BF17'"));
}

TEST_CASE("a shape that disagrees with the byte span is refused", "[index][bad_input]") {
  const fs::path dir = tiny_copy("shape");
  const fs::path shard = shard_files(dir).front();
  auto s = read_shard(shard);
  // The first shard starts with the embedding [768, 64]; claim [768, 65].
  s.json = replace_once(s.json, "\"shape\":[768,64]", "\"shape\":[768,65]");
  write_shard(shard, s);
  CHECK_THAT(refusal(dir), Catch::Contains(shard.string()) &&
                               Catch::Contains("'language_model.model.embed_tokens.weight'") &&
                               Catch::Contains("data_offsets span"));
}

TEST_CASE("overlapping spans are refused", "[index][bad_input]") {
  const fs::path dir = tiny_copy("overlap");
  const fs::path shard = shard_files(dir)[1];
  auto s = read_shard(shard);
  // Move the second tensor's span back by 2 bytes (same length): it overlaps the first.
  const auto first_end_pos = s.json.find("\"data_offsets\":[0,");
  REQUIRE(first_end_pos != std::string::npos);
  const auto comma = s.json.find(',', first_end_pos + 16);
  const auto close = s.json.find(']', comma);
  const std::uint64_t end0 = std::stoull(s.json.substr(comma + 1, close - comma - 1));
  const std::string second = "\"data_offsets\":[" + std::to_string(end0) + ",";
  const auto pos2 = s.json.find(second);
  REQUIRE(pos2 != std::string::npos);
  const auto close2 = s.json.find(']', pos2);
  const std::uint64_t end1 = std::stoull(s.json.substr(pos2 + second.size(), close2 - pos2 - second.size()));
  s.json.replace(pos2, close2 - pos2, "\"data_offsets\":[" + std::to_string(end0 - 2) + "," + std::to_string(end1 - 2));
  write_shard(shard, s);
  CHECK_THAT(refusal(dir), Catch::Contains(shard.string()) && Catch::Contains("overlap"));
}

TEST_CASE("a tensor name in two shards is refused", "[index][bad_input]") {
  const fs::path dir = tiny_copy("duplicate");
  const auto shards = shard_files(dir);
  REQUIRE(shards.size() >= 3);
  const std::string taken = first_tensor_after_metadata(read_shard(shards[1]).json);
  auto s = read_shard(shards[2]);
  const std::string victim = first_tensor_after_metadata(s.json);
  // Same length keeps the header size; pad the name difference with JSON whitespace.
  std::string json = replace_once(s.json, "\"" + victim + "\"", "\"" + taken + "\"");
  s.json = json;
  write_shard(shards[2], s);
  CHECK_THAT(refusal(dir), Catch::Contains("'" + taken + "'") && Catch::Contains("duplicate") &&
                               Catch::Contains(shards[1].string()) && Catch::Contains(shards[2].string()));
}

TEST_CASE("a tensor listed in model.safetensors.index.json but absent is refused", "[index][bad_input]") {
  const fs::path dir = tiny_copy("index-json");
  const fs::path shard = shard_files(dir)[1];
  auto s = read_shard(shard);
  const std::string victim = first_tensor_after_metadata(s.json);
  s.json = replace_once(s.json, "\"" + victim + "\"", "\"" + victim + "_renamed\"");
  write_shard(shard, s);
  const auto msg = refusal(dir);
  CHECK_THAT(msg, Catch::Contains("model.safetensors.index.json") && Catch::Contains("'" + victim + "'") &&
                      Catch::Contains(shard.filename().string()));
}

TEST_CASE("require() names file and tensor for a wrong dtype, shape or a missing tensor", "[index][bad_input]") {
  const auto index = k3::test::open_index(test_model("tiny"));
  const std::string name = "language_model.model.layers.0.self_attn.A_log";
  const TensorInfo* t = index.find(name);
  REQUIRE(t != nullptr);
  const std::string file = index.files()[t->file].uri;
  CHECK_THROWS_WITH(index.require(name, DType::bf16, {16}),
                    Catch::Contains(file) && Catch::Contains(name) && Catch::Contains("dtype F32, expected BF16"));
  CHECK_THROWS_WITH(index.require(name, DType::f32, {2}),
                    Catch::Contains(file) && Catch::Contains(name) && Catch::Contains("shape [16], expected [2]"));
  CHECK_THROWS_AS(index.require("language_model.model.layers.99.mlp.up_proj.weight", DType::bf16, {1}), UsageError);
  CHECK(index.find("no.such.tensor") == nullptr);
}

TEST_CASE("config.json with a missing key is refused naming the key", "[config][bad_input]") {
  const fs::path dir = tiny_copy("cfg-missing");
  const fs::path cfg = dir / "config.json";
  std::string json = read_file(cfg);
  json = replace_once(json, "\"hidden_size\": 64,", "");
  json = replace_once(json, "\"num_heads\": 2,", "");
  write_file(cfg, json);
  const auto msg = config_refusal(cfg);
  CHECK_THAT(msg, Catch::Contains(cfg.string()) && Catch::Contains("text_config.hidden_size") &&
                      Catch::Contains("text_config.linear_attn_config.num_heads") && Catch::Contains("missing"));
}

TEST_CASE("config.json with a layer map out of range is refused", "[config][bad_input]") {
  const fs::path dir = tiny_copy("cfg-map");
  const fs::path cfg = dir / "config.json";
  write_file(cfg, replace_once(read_file(cfg), "\"full_attn_layers\": [2, 5, 6]", "\"full_attn_layers\": [2, 5, 7]"));
  CHECK_THAT(config_refusal(cfg), Catch::Contains("text_config.linear_attn_config.full_attn_layers") &&
                                      Catch::Contains("layer 7 outside 1..6"));
  // 0 is out of range too: the list is 1-based.
  write_file(cfg, replace_once(read_file(cfg), "\"full_attn_layers\": [2, 5, 7]", "\"full_attn_layers\": [0, 5]"));
  CHECK_THAT(config_refusal(cfg), Catch::Contains("layer 0 outside 1..6"));
}

TEST_CASE("config.json inconsistencies are refused naming the key", "[config][bad_input]") {
  const fs::path dir = tiny_copy("cfg-inconsistent");
  const fs::path cfg = dir / "config.json";
  const std::string good = read_file(cfg);
  struct Case {
    std::string from, to, key, what;
  };
  const std::vector<Case> cases = {
      {"\"num_heads\": 2,", "\"num_heads\": 17,", "text_config.linear_attn_config.num_heads", "exceed head_dim"},
      {"\"num_experts_per_token\": 2,", "\"num_experts_per_token\": 9,", "text_config.num_experts_per_token",
       "exceeds num_experts"},
      {"\"hidden_size\": 64,", "\"hidden_size\": 0,", "text_config.hidden_size", "must be in 1.."},
      {"\"kv_lora_rank\": 32,", "\"kv_lora_rank\": -1,", "text_config.kv_lora_rank", "must be in 1.."},
      {"\"moe_intermediate_size\": 64,", "\"moe_intermediate_size\": 48,", "text_config.moe_intermediate_size",
       "multiple of 32"},
      {"\"hidden_size\": 64,", "\"hidden_size\": 64.5,", "text_config.hidden_size", "expected an integer"},
      {"\"rms_norm_eps\": 1e-05,", "\"rms_norm_eps\": 0.0,", "text_config.rms_norm_eps", "(0, 1)"},
      {"\"first_k_dense_replace\": 1,", "\"first_k_dense_replace\": 7,", "text_config.first_k_dense_replace",
       "0..num_hidden_layers"},
      {"\"full_attn_layers\": [2, 5, 6]", "\"full_attn_layers\": [2, 2, 6]", "full_attn_layers", "twice"},
      {"\"full_attn_layers\": [2, 5, 6]", "\"full_attn_layers\": [1, 2, 3, 4, 5, 6]", "full_attn_layers",
       "at least one KDA layer"},
      {"\"eos_token_id\": 514,\n    \"pad", "\"eos_token_id\": 768,\n    \"pad", "text_config.eos_token_id",
       "outside the vocabulary"},
  };
  for (const auto& c : cases) {
    INFO(c.to);
    write_file(cfg, replace_once(good, c.from, c.to));
    CHECK_THAT(config_refusal(cfg), Catch::Contains(cfg.string()) && Catch::Contains(c.key) && Catch::Contains(c.what));
  }
  write_file(cfg, "{ not json");
  CHECK_THAT(config_refusal(cfg), Catch::Contains("not valid JSON"));
}

TEST_CASE("a flat config (keys at the root, kda_ aliases) is read like the nested one", "[config]") {
  const auto nested = k3::test::read_config(test_model("tiny"));
  const fs::path dir = fresh_dir("flat");
  const std::string flat = R"({
    "hidden_size": 64, "num_hidden_layers": 6, "vocab_size": 768, "rms_norm_eps": 1e-05,
    "full_attn_layers": [2, 5, 6], "kda_num_heads": 2, "kda_head_dim": 16, "short_conv_kernel_size": 4,
    "gate_lower_bound": -5.0, "num_attention_heads": 2, "q_lora_rank": 32, "kv_lora_rank": 32,
    "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "mla_use_output_gate": true,
    "num_experts": 8, "num_experts_per_token": 2, "num_shared_experts": 1, "moe_intermediate_size": 64,
    "routed_expert_hidden_size": 32, "latent_moe_use_norm": true, "moe_renormalize": true,
    "routed_scaling_factor": 1.0, "first_k_dense_replace": 1, "intermediate_size": 128,
    "attn_res_block_size": 2, "activation_situ_beta": 4.0, "activation_situ_linear_beta": 25.0,
    "bos_token_id": 512, "eos_token_id": 514})";
  write_file(dir / "config.json", flat);
  CHECK(k3::test::read_config(dir).fingerprint() == nested.fingerprint());
  write_file(dir / "config.json", replace_once(flat, "\"kda_num_heads\": 2, ", ""));
  CHECK_THAT(config_refusal(dir / "config.json"), Catch::Contains("linear_attn_config.num_heads"));
}

TEST_CASE("config.json's k3host_thinking says whether the model thinks, and another type is refused",
          "[config][bad_input]") {
  const fs::path dir = tiny_copy("cfg-thinking");
  const fs::path cfg = dir / "config.json";
  const std::string good = read_file(cfg);
  CHECK_FALSE(k3::test::read_config(dir).thinking.has_value());  // a synthetic K3 says nothing: it thinks
  const std::string head = "\"model_type\": \"kimi_k3\",";
  write_file(cfg, replace_once(good, head, head + " \"k3host_thinking\": false,"));
  CHECK(k3::test::read_config(dir).thinking == std::optional<bool>(false));
  write_file(cfg, replace_once(good, head, head + " \"k3host_thinking\": \"no\","));
  CHECK_THAT(config_refusal(cfg),
             Catch::Contains(cfg.string()) && Catch::Contains("k3host_thinking must be true or false"));
}
