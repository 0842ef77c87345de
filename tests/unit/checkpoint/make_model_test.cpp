// make-model on the tiny geometries: every tensor of the spec with its dtype and shape, the
// config round trip, the tokenizer files, MXFP4 magnitudes, determinism and atomicity.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <csignal>
#include <set>

#include <catch2/catch.hpp>

#include <k3/checkpoint.hpp>
#include <k3/error.hpp>
#include <k3/geometry.hpp>
#include <k3/make_model.hpp>
#include <k3/model_config.hpp>

#include "checkpoint_test_util.hpp"
#include "local_storage.hpp"

namespace fs = std::filesystem;
using namespace k3;
using k3::test::fresh_dir;
using k3::test::read_file;

namespace {

fs::path geometry_file(const std::string& name) {
  return fs::path(K3_SOURCE_DIR) / "configs/models" / (name + ".yaml");
}

fs::path write_model(const std::string& geometry, const std::string& tag, std::optional<std::uint64_t> seed = {}) {
  const fs::path dir = fresh_dir(tag) / "model";
  MakeModelOptions o;
  o.out = dir;
  o.seed = seed;
  make_model(load_geometry(geometry_file(geometry).string()), o);
  return dir;
}

std::string b64decode(const std::string& s) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  unsigned acc = 0;
  int bits = 0;
  for (char c : s) {
    const int v = val(c);
    if (v < 0) break;  // '=' padding
    acc = (acc << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("make-model writes every tensor of the spec with its dtype and shape", "[make_model]") {
  for (const std::string geometry : {"tiny", "tiny2"}) {
    INFO("geometry " << geometry);
    const fs::path dir = write_model(geometry, "layout-" + geometry);
    const ModelConfig c = k3::test::read_config(dir);
    const auto expected = k3::test::spec_inventory(c);
    const auto index = k3::test::open_index(dir);
    REQUIRE(index.tensors().size() == expected.size());
    REQUIRE(index.files().size() > 1);  // the tiny geometries are sharded on purpose
    for (const auto& [name, want] : expected) {
      INFO(name);
      const TensorInfo* t = index.find(name);
      REQUIRE(t != nullptr);
      CHECK(t->dtype == want.dtype);
      CHECK(t->shape == want.shape);
      CHECK_NOTHROW(index.require(name, want.dtype, want.shape));
    }
    // Shard names follow the release's model-XXXXX-of-YYYYY pattern.
    const auto n = index.files().size();
    for (std::size_t i = 0; i < n; ++i) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
      CHECK(index.files()[i].name == buf);
    }
    // index.json: metadata.total_size is the sum of the tensor bytes.
    std::uint64_t total = 0;
    for (const auto& t : index.tensors()) total += t.nbytes;
    const std::string idx = read_file(dir / "model.safetensors.index.json");
    CHECK(idx.find("\"total_size\": " + std::to_string(total) + "}") != std::string::npos);
  }
}

TEST_CASE("config.json round trip: the written config reads back as the geometry", "[make_model]") {
  const auto g = load_geometry(geometry_file("tiny").string());
  const fs::path dir = write_model("tiny", "roundtrip");
  const ModelConfig c = k3::test::read_config(dir);
  CHECK(c.fingerprint() == g.config.fingerprint());
  // The values the tiny.yaml file states, checked by hand (not through the reader).
  CHECK(c.hidden_size == 64);
  CHECK(c.num_hidden_layers == 6);
  CHECK(c.mla_layers == std::vector<std::int64_t>{1, 4, 5});  // 1-based [2, 5, 6] in the file
  CHECK(c.is_mla(1));
  CHECK_FALSE(c.is_mla(0));
  CHECK(c.is_dense(0));
  CHECK_FALSE(c.is_dense(1));
  CHECK(c.kda_num_heads == 2);
  CHECK(c.kda_head_dim == 16);
  CHECK(c.attn_res_block_size == 2);
  CHECK(c.bos_token_id == 512);
  CHECK(c.eos_token_id == 514);
  CHECK(c.vocab_size == 768);
  CHECK(c.rms_norm_eps == 1.0e-5);
  CHECK(c.gate_lower_bound == -5.0);
  // The released nesting: LM keys under text_config, the layer map under linear_attn_config.
  const std::string json = read_file(dir / "config.json");
  CHECK(json.find("\"model_type\": \"kimi_k3\"") != std::string::npos);
  CHECK(json.find("\"text_config\"") != std::string::npos);
  CHECK(json.find("\"full_attn_layers\": [2, 5, 6]") != std::string::npos);
  // A different geometry has a different fingerprint.
  CHECK(load_geometry(geometry_file("tiny2").string()).config.fingerprint() != c.fingerprint());
}

TEST_CASE("tokenizer files: byte ranks, BPE merges, K3 specials at ranks+0..255", "[make_model][tokenizer]") {
  const auto g = load_geometry(geometry_file("tiny").string());
  const fs::path dir = write_model("tiny", "tokenizer");
  std::istringstream lines(read_file(dir / "tiktoken.model"));
  std::vector<std::string> tokens;
  std::string b64;
  std::int64_t rank = 0;
  while (lines >> b64 >> rank) {
    REQUIRE(rank == static_cast<std::int64_t>(tokens.size()));
    tokens.push_back(b64decode(b64));
  }
  REQUIRE(static_cast<std::int64_t>(tokens.size()) == g.writer.tokenizer_ranks);
  std::set<std::string> seen(tokens.begin(), tokens.end());
  CHECK(seen.size() == tokens.size());  // every token distinct
  for (int b = 0; b < 256; ++b) CHECK(tokens[static_cast<std::size_t>(b)] == std::string(1, static_cast<char>(b)));
  // Every merge is two earlier tokens (so rank BPE can reach it).
  std::set<std::string> earlier(tokens.begin(), tokens.begin() + 256);
  for (std::size_t r = 256; r < tokens.size(); ++r) {
    const auto& t = tokens[r];
    bool split = false;
    for (std::size_t k = 1; k < t.size() && !split; ++k)
      split = earlier.count(t.substr(0, k)) && earlier.count(t.substr(k));
    INFO("rank " << r);
    CHECK(split);
    earlier.insert(t);
  }
  // Common English pieces were learned.
  CHECK(seen.count(" the"));
  CHECK(seen.count("ing"));
  const std::string cfg = read_file(dir / "tokenizer_config.json");
  CHECK(cfg.find("\"512\": {\"content\": \"[BOS]\"") != std::string::npos);
  CHECK(cfg.find("\"513\": {\"content\": \"[EOS]\"") != std::string::npos);
  CHECK(cfg.find("\"514\": {\"content\": \"<|end_of_msg|>\"") != std::string::npos);
  CHECK(cfg.find("\"767\": {\"content\": \"[PAD]\"") != std::string::npos);
  CHECK(cfg.find("\"520\": {\"content\": \"<|reserved_token_520|>\"") != std::string::npos);
}

TEST_CASE("the demo tokenizer is all learned merges (the sample does not saturate)", "[make_model][tokenizer]") {
  const auto g = load_geometry(geometry_file("demo").string());
  const std::string ranks = make_tiktoken_ranks(g.writer.tokenizer_ranks);
  std::istringstream lines(ranks);
  std::string b64;
  std::int64_t rank = 0, filler = 0, count = 0;
  while (lines >> b64 >> rank) {
    ++count;
    const auto t = b64decode(b64);
    if (t.size() == 4 && static_cast<unsigned char>(t[0]) == 0xF8) ++filler;
  }
  CHECK(count == g.writer.tokenizer_ranks);
  CHECK(filler == 0);
}

TEST_CASE("weights: norms near 1, projections ~1/sqrt(fan_in), MXFP4 groups with zero groups", "[make_model]") {
  const fs::path dir = write_model("tiny", "weights");
  const auto c = k3::test::read_config(dir);
  const auto index = k3::test::open_index(dir);
  auto bytes_of = [&](const std::string& name) {
    const TensorInfo* t = index.find(name);
    REQUIRE(t != nullptr);
    const std::string all = read_file(index.files()[t->file].uri);
    return all.substr(t->offset, t->nbytes);
  };
  auto bf16_values = [&](const std::string& name) {
    const std::string b = bytes_of(name);
    std::vector<float> v;
    for (std::size_t i = 0; i + 1 < b.size(); i += 2) {
      const std::uint32_t bits = (static_cast<std::uint32_t>(static_cast<unsigned char>(b[i + 1])) << 24) |
                                 (static_cast<std::uint32_t>(static_cast<unsigned char>(b[i])) << 16);
      v.push_back(std::bit_cast<float>(bits));
    }
    return v;
  };
  auto rms = [](const std::vector<float>& v) {
    double s = 0;
    for (float x : v) s += static_cast<double>(x) * x;
    return std::sqrt(s / static_cast<double>(v.size()));
  };
  for (float w : bf16_values("language_model.model.layers.0.input_layernorm.weight")) {
    CHECK(w > 0.85f);
    CHECK(w < 1.15f);
  }
  const auto q = bf16_values("language_model.model.layers.0.self_attn.q_proj.weight");
  const double want = 1.0 / std::sqrt(static_cast<double>(c.hidden_size));
  CHECK(rms(q) == Approx(want).epsilon(0.1));

  // Decode expert matrices per docs/model-spec.md §4 and check the magnitude 1/sqrt(cols).
  const float e2m1[16] = {0, .5f, 1, 1.5f, 2, 3, 4, 6, -0.f, -.5f, -1, -1.5f, -2, -3, -4, -6};
  std::int64_t zero_groups = 0, experts_with_zero_groups = 0;
  for (std::int64_t e = 0; e < c.num_experts; ++e) {
    const std::string x = "language_model.model.layers.2.block_sparse_moe.experts." + std::to_string(e) + ".w2.";
    const std::string packed = bytes_of(x + "weight_packed"), scale = bytes_of(x + "weight_scale");
    const auto rows = static_cast<std::size_t>(c.routed_expert_hidden_size),
               cols = static_cast<std::size_t>(c.moe_intermediate_size);
    std::vector<float> v;
    std::int64_t z = 0;
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t i = 0; i < cols; ++i) {
        const auto code = (static_cast<unsigned char>(packed[r * cols / 2 + i / 2]) >> (4 * (i % 2))) & 0xF;
        const auto s = static_cast<unsigned char>(scale[r * cols / 32 + i / 32]);
        if (s == 255) {
          if (i % 32 == 0) ++z;
          continue;
        }
        v.push_back(std::ldexp(e2m1[code], s - 127));
      }
    zero_groups += z;
    experts_with_zero_groups += z > 0;
    CHECK(rms(v) == Approx(1.0 / std::sqrt(static_cast<double>(cols))).epsilon(0.5));
  }
  CHECK(zero_groups > 0);
  CHECK(experts_with_zero_groups < c.num_experts);  // only some experts carry them
}

TEST_CASE("make-model is deterministic: same seed same bytes, other seed other weights", "[make_model]") {
  const fs::path a = write_model("tiny", "det-a"), b = write_model("tiny", "det-b");
  const fs::path other = write_model("tiny", "det-c", 99);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(a)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  std::vector<std::string> names_b;
  for (const auto& e : fs::directory_iterator(b)) names_b.push_back(e.path().filename().string());
  std::sort(names_b.begin(), names_b.end());
  REQUIRE(names == names_b);
  for (const auto& n : names) {
    INFO(n);
    CHECK(read_file(a / n) == read_file(b / n));
  }
  const auto shards = k3::test::shard_files(a);
  const auto other_shards = k3::test::shard_files(other);
  REQUIRE(shards.size() == other_shards.size());
  CHECK(read_file(shards[1]) != read_file(other_shards[1]));
  CHECK(read_file(a / "tiktoken.model") == read_file(other / "tiktoken.model"));
}

TEST_CASE("make-model refuses to overwrite a non-empty directory unless forced", "[make_model][atomic]") {
  const fs::path dir = fresh_dir("overwrite") / "model";
  MakeModelOptions o;
  o.out = dir;
  const auto g = load_geometry(geometry_file("tiny").string());
  make_model(g, o);
  k3::test::write_file(dir / "extra.txt", "written into the checkpoint");
  try {
    make_model(g, o);
    FAIL("expected a refusal");
  } catch (const UsageError& e) {
    CHECK_THAT(e.what(), Catch::Contains("not empty") && Catch::Contains("--force"));
  }
  CHECK(read_file(dir / "extra.txt") == "written into the checkpoint");
  o.force = true;  // a checkpoint make-model wrote may be replaced
  make_model(g, o);
  CHECK_FALSE(fs::exists(dir / "extra.txt"));
  CHECK(fs::exists(dir / "config.json"));
  // An empty existing directory is simply used.
  const fs::path empty = fresh_dir("empty-target") / "model";
  fs::create_directories(empty);
  o.out = empty;
  o.force = false;
  make_model(g, o);
  CHECK(fs::exists(empty / "config.json"));
  // Nothing but the targets is left in the parents (no temporary or old directories).
  for (const auto& p : {dir.parent_path(), empty.parent_path()}) {
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(p)) ++entries;
    CHECK(entries == 1);
  }
}

TEST_CASE("make-model --force never replaces a folder it did not write", "[make_model][atomic]") {
  const fs::path dir = fresh_dir("foreign") / "data";
  fs::create_directories(dir);
  k3::test::write_file(dir / "precious.txt", "keep me");
  MakeModelOptions o;
  o.out = dir;
  o.force = true;
  try {
    make_model(load_geometry(geometry_file("tiny").string()), o);
    FAIL("expected a refusal");
  } catch (const UsageError& e) {
    CHECK_THAT(e.what(), Catch::Contains("not a checkpoint make-model wrote"));
  }
  CHECK(read_file(dir / "precious.txt") == "keep me");
}

TEST_CASE("a temporary folder left by a killed writer is removed by the next write", "[make_model][atomic]") {
  const fs::path parent = fresh_dir("stale");
  // A pid that is certainly gone: a child that has exited and been reaped.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  const fs::path stale = parent / (".model.k3tmp." + std::to_string(child) + ".AbCdEf");
  const fs::path live = parent / (".model.k3tmp." + std::to_string(::getpid()) + ".AbCdEf");  // a writer still running
  const fs::path other = parent / (".other.k3tmp." + std::to_string(child) + ".AbCdEf");      // another target's
  for (const auto& p : {stale, live, other}) {
    fs::create_directories(p);
    k3::test::write_file(p / "model-00001-of-00002.safetensors", "half");
  }
  MakeModelOptions o;
  o.out = parent / "model";
  make_model(load_geometry(geometry_file("tiny").string()), o);
  CHECK_FALSE(fs::exists(stale));
  CHECK(fs::exists(live));
  CHECK(fs::exists(other));
}

TEST_CASE("make-model that fails mid-write leaves no directory behind", "[make_model][atomic]") {
  // A file-size limit makes the first shard's write fail with EFBIG part-way through.
  const fs::path parent = fresh_dir("midwrite");
  const fs::path dir = parent / "model";
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 40 * 1024;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  MakeModelOptions o;
  o.out = dir;
  bool threw = false;
  std::string message;
  try {
    make_model(load_geometry(geometry_file("tiny").string()), o);
  } catch (const RuntimeError& e) {
    threw = true;
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  CHECK(threw);
  CHECK_THAT(message, Catch::Contains("model-00001-of-"));
  CHECK_FALSE(fs::exists(dir));
  CHECK(fs::is_empty(parent));  // the temporary directory is gone too
}

TEST_CASE("geometry k3 is refused for a real write, with the size in the message", "[make_model]") {
  MakeModelOptions o;
  o.out = fresh_dir("k3-refused") / "model";
  try {
    make_model(load_geometry("k3"), o);
    FAIL("expected a refusal");
  } catch (const UsageError& e) {
    CHECK_THAT(e.what(), Catch::Contains("--headers-only") && Catch::Contains("TB"));
  }
  CHECK_FALSE(fs::exists(o.out));
}
