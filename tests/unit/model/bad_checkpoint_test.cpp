// A checkpoint that disagrees with its config is refused while binding, before any compute,
// with a UsageError (exit 2) naming the file and the tensor.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <sstream>

#include <k3/error.hpp>
#include <k3/model.hpp>

#include "local_storage.hpp"
#include "test_models.hpp"

namespace fs = std::filesystem;

namespace {

k3::test::ScratchCleanup cleanup;

fs::path copy_of_tiny(const std::string& name) {
  const fs::path dst = k3::test::scratch_dir() / name;
  fs::remove_all(dst);
  fs::copy(k3::test::test_model("tiny"), dst, fs::copy_options::recursive);
  return dst;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

/// Replaces the first occurrence of `from` with `to` (same length) in whichever shard holds it.
fs::path patch_shards(const fs::path& dir, const std::string& from, const std::string& to) {
  REQUIRE(from.size() == to.size());
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    std::string bytes = slurp(e.path());
    const auto at = bytes.find(from);
    if (at == std::string::npos) continue;
    bytes.replace(at, from.size(), to);
    spit(e.path(), bytes);
    return e.path();
  }
  FAIL("no shard holds " << from);
  return {};
}

k3::ModelSettings scalar() {
  k3::ModelSettings s;
  s.kernels = "scalar";
  s.threads = 1;
  return s;
}

/// The message of the UsageError (exit 2) that loading `dir` must end in.
std::string usage_error_loading(const fs::path& dir) {
  k3::PluginHost host;
  try {
    k3::Model model(dir, host, scalar());
  } catch (const k3::Error& e) {
    CHECK(e.code() == k3::ExitCode::usage);
    return e.what();
  }
  FAIL("the model at " << dir << " loaded");
  return {};
}

}  // namespace

TEST_CASE("a missing tensor is refused naming it", "[model][errors]") {
  const fs::path dir = copy_of_tiny("missing");
  // Rename the tensor in the shard header (same length), and drop it from the index file
  // so that the index check does not catch it first.
  const std::string name = "layers.0.self_attn.o_norm.weight";
  patch_shards(dir, name, "layers.0.self_attn.o_norm.weighX");
  std::string index = slurp(dir / "model.safetensors.index.json");
  index = std::regex_replace(
      index, std::regex("\"language_model\\.model\\.layers\\.0\\.self_attn\\.o_norm\\.weight\"\\s*:\\s*\"[^\"]*\",?"),
      "");
  spit(dir / "model.safetensors.index.json", index);
  CHECK_THAT(usage_error_loading(dir), Catch::Contains("o_norm.weight"));
}

TEST_CASE("a tensor whose shape disagrees with config.json is refused naming file and tensor", "[model][errors]") {
  const fs::path dir = copy_of_tiny("shape");
  // Claim a larger dense MLP in the config: layer 0's mlp tensors then have the wrong shape.
  std::string cfg = slurp(dir / "config.json");
  const std::regex key("\"intermediate_size\"\\s*:\\s*([0-9]+)");
  std::smatch m;
  REQUIRE(std::regex_search(cfg, m, key));
  const long wider = std::stol(m[1]) + 32;
  cfg = std::regex_replace(cfg, key, "\"intermediate_size\": " + std::to_string(wider),
                           std::regex_constants::format_first_only);
  spit(dir / "config.json", cfg);
  CHECK_THAT(usage_error_loading(dir), Catch::Contains("mlp.") && Catch::Contains(".safetensors"));
}

TEST_CASE("a tensor with the wrong dtype is refused", "[model][errors]") {
  const fs::path dir = copy_of_tiny("dtype");
  // Every tensor that is not a routed expert is BF16 or F32; relabel the first F32 one (a
  // release-mix convolution kernel, A_log or dt_bias) as I32 (same byte size and length).
  patch_shards(dir, "\"dtype\":\"F32\",\"shape\"", "\"dtype\":\"I32\",\"shape\"");
  CHECK_THAT(usage_error_loading(dir),
             Catch::Contains("dtype I32, expected BF16 or F32") && Catch::Contains(".safetensors"));
}

TEST_CASE("a missing checkpoint directory is a usage error", "[model][errors]") {
  k3::PluginHost host;
  CHECK_THROWS_AS(k3::Model(k3::test::scratch_dir() / "nowhere", host, scalar()), k3::UsageError);
}

TEST_CASE("a cache policy that needs the future is refused in a live run", "[model][errors]") {
  k3::PluginHost host;
  k3::ModelSettings s = scalar();
  s.cache_policy = "belady";
  CHECK_THROWS_WITH(k3::Model(k3::test::test_model("tiny"), host, s), Catch::Contains("future request stream"));
  s.cache_policy = "no-such-policy";
  CHECK_THROWS_AS(k3::Model(k3::test::test_model("tiny"), host, s), k3::UsageError);
}

TEST_CASE("a config.json that declares more of the model than the shards hold is refused before planning",
          "[model][errors]") {
  const fs::path dir = copy_of_tiny("declared");
  const fs::path cfg = dir / "config.json";
  const std::string text = slurp(cfg);
  const std::regex experts("\"num_experts\"\\s*:\\s*[0-9]+");
  REQUIRE(std::regex_search(text, experts));
  SECTION("sixteen million experts") {
    spit(cfg, std::regex_replace(text, experts, "\"num_experts\": 16777216"));
    CHECK_THAT(usage_error_loading(dir), Catch::Contains("config.json declares") &&
                                             Catch::Contains("16777216 experts") && Catch::Contains("do not match"));
  }
  SECTION("a hidden size the shards do not have") {
    const std::regex hidden("\"hidden_size\"\\s*:\\s*([0-9]+)");
    std::smatch m;
    REQUIRE(std::regex_search(text, m, hidden));
    const std::string bigger = std::to_string(std::stoll(m[1].str()) * 2);
    spit(cfg, std::regex_replace(text, hidden, "\"hidden_size\": " + bigger, std::regex_constants::format_first_only));
    CHECK_THAT(usage_error_loading(dir), Catch::Contains(".safetensors"));
  }
}

namespace {

/// Overwrites every element of the BF16 tensor whose name ends in `suffix` with `bits`.
void fill_bf16(const fs::path& dir, const std::string& suffix, std::uint16_t bits) {
  const k3::CheckpointIndex index = k3::test::open_index(dir);
  for (const k3::TensorInfo& t : index.tensors()) {
    if (t.name.size() < suffix.size() || t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    REQUIRE(t.dtype == k3::DType::bf16);
    std::fstream f(dir / index.files()[t.file].name, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(t.offset));
    for (std::uint64_t k = 0; k < t.nbytes / 2; ++k) f.write(reinterpret_cast<const char*>(&bits), 2);
    REQUIRE(f.good());
    return;
  }
  FAIL("no tensor ends in " << suffix);
}

std::string runtime_error_feeding(const fs::path& dir) {
  k3::PluginHost host;
  k3::Model model(dir, host, scalar());
  k3::Session session(model, 16);
  std::vector<float> logits;
  const std::vector<std::uint32_t> ids = {1, 2, 3};
  try {
    session.feed(ids, false, logits);
  } catch (const k3::Error& e) {
    CHECK(e.code() == k3::ExitCode::runtime);
    return e.what();
  }
  FAIL("non-finite weights ran without an error");
  return {};
}

}  // namespace

TEST_CASE("non-finite weights stop the forward pass naming the block and layer where they first appear",
          "[model][errors]") {
  SECTION("NaN in layer 1's FFN norm") {
    const fs::path dir = copy_of_tiny("nan");
    fill_bf16(dir, "layers.1.post_attention_layernorm.weight", 0x7FC0);
    CHECK_THAT(runtime_error_feeding(dir), Catch::Contains("NaN") && Catch::Contains("after the FFN of layer 1") &&
                                               Catch::Contains("at position 0"));
  }
  SECTION("infinity in layer 2's attention norm") {
    const fs::path dir = copy_of_tiny("inf");
    fill_bf16(dir, "layers.2.input_layernorm.weight", 0x7F80);
    CHECK_THAT(runtime_error_feeding(dir), Catch::Contains("after the attention of layer 2"));
  }
  SECTION("the untouched checkpoint runs") {
    k3::PluginHost host;
    k3::Model model(k3::test::test_model("tiny"), host, scalar());
    k3::Session session(model, 16);
    std::vector<float> logits;
    const std::vector<std::uint32_t> ids = {1, 2, 3};
    CHECK_NOTHROW(session.feed(ids, false, logits));
  }
}
