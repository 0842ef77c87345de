// The `synthetic` storage decorator over a `make-model --headers-only` checkpoint (sparse
// shards that read as zeros): the bytes of a tensor do not depend on how reads are split,
// headers and other files pass through, every tensor holds valid values of its dtype, and
// the model it makes runs: finite logits, the same bits at every memory budget, tokens
// routed to different experts.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <k3/checkpoint.hpp>
#include <k3/error.hpp>
#include <k3/geometry.hpp>
#include <k3/make_model.hpp>
#include <k3/model.hpp>
#include <k3/plan.hpp>

#include "../storage/storage_support.hpp"
#include "local_storage.hpp"
#include "test_models.hpp"

using namespace k3test;

namespace {

k3::test::ScratchCleanup cleanup;

/// `geometry` written with --headers-only, once per process.
const std::filesystem::path& headers_only(const std::string& geometry) {
  static std::map<std::string, std::filesystem::path> made;
  if (auto it = made.find(geometry); it != made.end()) return it->second;
  const auto dir = k3::test::scratch_dir() / ("headers-" + geometry);
  k3::MakeModelOptions o;
  o.out = dir;
  o.force = true;
  o.headers_only = true;
  k3::make_model(k3::load_geometry(
                     (std::filesystem::path(K3_SOURCE_DIR) / "configs/models" / (geometry + ".yaml")).string()),
                 o);
  return made.emplace(geometry, dir).first->second;
}

std::vector<std::byte> read_all(k3::sdk::StorageBackend& backend, const std::string& uri) {
  auto file = open_file(backend, uri);
  std::vector<OwnedRequest> owned;
  owned.emplace_back(0, file->size());
  const auto st = read_batch(*file, owned);
  if (!st.ok()) throw std::runtime_error(st.detail);
  return owned[0].buffer;
}

float bf16_at(const std::byte* p) {
  const std::uint32_t bits = (std::to_integer<std::uint32_t>(p[1]) << 24) |
                             (std::to_integer<std::uint32_t>(p[0]) << 16);
  return std::bit_cast<float>(bits);
}

float f32_at(const std::byte* p) {
  std::uint32_t bits = 0;
  for (int k = 3; k >= 0; --k) bits = bits << 8 | std::to_integer<std::uint32_t>(p[k]);
  return std::bit_cast<float>(bits);
}

}  // namespace

TEST_CASE("synthetic: a tensor's bytes do not depend on how reads are split", "[synthetic]") {
  const auto& dir = headers_only("tiny");
  auto synthetic = plugin_host().create_storage("synthetic", {});
  const auto index = k3::test::open_index(dir);
  std::mt19937_64 rng(11);
  for (const auto& shard : index.files()) {
    CAPTURE(shard.name);
    const auto whole = read_all(*synthetic, shard.uri);
    auto file = open_file(*synthetic, shard.uri);
    const std::uint64_t size = file->size();
    REQUIRE(whole.size() == size);
    // Batches of random requests: odd offsets and lengths, 1 byte to 64 KiB, across
    // tensor and block boundaries, in any order.
    for (int batch = 0; batch < 40; ++batch) {
      std::vector<OwnedRequest> owned;
      const int n = 1 + static_cast<int>(rng() % 8);
      for (int i = 0; i < n; ++i) {
        const std::uint64_t length = 1 + rng() % std::min<std::uint64_t>(size, 65536);
        owned.emplace_back(rng() % (size - length + 1), length);
      }
      REQUIRE(read_batch(*file, owned).ok());
      for (const auto& o : owned) {
        INFO("offset " << o.request.offset << " length " << o.request.length);
        CHECK(std::memcmp(o.buffer.data(), whole.data() + o.request.offset, o.request.length) == 0);
      }
    }
    // The same shard in another folder: keyed by file name, not path.
    const auto renamed_dir = k3::test::scratch_dir() / "elsewhere";
    std::filesystem::create_directories(renamed_dir);
    std::filesystem::copy_file(shard.uri, renamed_dir / shard.name, std::filesystem::copy_options::overwrite_existing);
    CHECK(read_all(*synthetic, (renamed_dir / shard.name).string()) == whole);
  }
}

TEST_CASE("synthetic: headers and other files pass through, and the seed changes the values", "[synthetic]") {
  const auto& dir = headers_only("tiny");
  auto synthetic = plugin_host().create_storage("synthetic", {});
  auto other_seed = plugin_host().create_storage("synthetic", {{"seed", "5"}});
  auto posix = posix_backend();
  CHECK(read_all(*synthetic, (dir / "config.json").string()) == read_all(*posix, (dir / "config.json").string()));
  const auto index = k3::test::open_index(dir);
  for (const auto& shard : index.files()) {
    CAPTURE(shard.name);
    const auto plain = read_all(*posix, shard.uri);
    const auto filled = read_all(*synthetic, shard.uri);
    std::uint64_t header = 0;
    for (int i = 7; i >= 0; --i)
      header = header << 8 | std::to_integer<std::uint64_t>(plain[static_cast<std::size_t>(i)]);
    REQUIRE(8 + header <= plain.size());
    CHECK(std::memcmp(plain.data(), filled.data(), 8 + header) == 0);
    CHECK(filled != plain);
    CHECK(read_all(*other_seed, shard.uri) != filled);
  }
}

TEST_CASE("synthetic: every tensor holds valid values of its dtype", "[synthetic]") {
  for (const std::string geometry : {"tiny", "tiny2"}) {
    CAPTURE(geometry);
    const auto& dir = headers_only(geometry);
    auto synthetic = plugin_host().create_storage("synthetic", {});
    const auto index = k3::test::open_index(dir);
    std::map<std::uint32_t, std::vector<std::byte>> shards;
    for (std::uint32_t f = 0; f < index.files().size(); ++f) shards[f] = read_all(*synthetic, index.files()[f].uri);
    std::size_t checked = 0;
    for (const auto& t : index.tensors()) {
      CAPTURE(t.name);
      const std::byte* p = shards.at(t.file).data() + t.offset;
      std::size_t nonzero = 0;
      if (t.dtype == k3::DType::bf16 || t.dtype == k3::DType::f32) {
        const std::size_t es = t.dtype == k3::DType::bf16 ? 2 : 4;
        const std::size_t n = t.nbytes / es;
        double sum = 0, sumsq = 0;
        bool finite = true, bounded = true;
        for (std::size_t i = 0; i < n; ++i) {
          const float v = es == 2 ? bf16_at(p + i * es) : f32_at(p + i * es);
          finite = finite && std::isfinite(v);
          bounded = bounded && std::fabs(v) < 4.0f;
          nonzero += v != 0.0f;
          sum += v;
          sumsq += static_cast<double>(v) * v;
        }
        CHECK(finite);
        CHECK(bounded);
        CHECK(nonzero * 10 >= n * 9);
        const bool norm = t.shape.size() == 1 && t.name.find("norm") != std::string::npos;
        if (norm) CHECK(sum / static_cast<double>(n) == Approx(1.0).margin(0.1));  // RMSNorm weights near one
        if (t.shape.size() == 2 && n >= 4096) {
          // Projections: zero mean, std 1/sqrt(fan_in) within a few per cent.
          const double mean = sum / static_cast<double>(n);
          const double sd = std::sqrt(sumsq / static_cast<double>(n) - mean * mean);
          double want = 1.0 / std::sqrt(static_cast<double>(t.shape.back()));
          if (t.name.ends_with("f_b_proj.weight")) want *= 0.25;
          if (t.name.ends_with("embed_tokens.weight")) want = 1.0;
          CHECK(std::fabs(mean) < 0.1 * want);
          CHECK(sd == Approx(want).epsilon(0.05));
        }
      } else {
        REQUIRE(t.dtype == k3::DType::u8);
        if (t.name.ends_with("weight_scale")) {
          // E8M0 group scales: never 0xFF (NaN), around the fan-in magnitude (2^-7 for 3584).
          const double cols = static_cast<double>(t.shape.back()) * 32.0;
          const int want = 127 + static_cast<int>(std::lround(-std::log2(2.9261749776799064 * std::sqrt(cols))));
          bool near = true;
          for (std::size_t i = 0; i < t.nbytes; ++i) near = near && std::abs(std::to_integer<int>(p[i]) - want) <= 1;
          CHECK(near);
        } else {
          std::set<int> seen;  // packed E2M1 pairs: every byte value is valid, and all occur
          for (std::size_t i = 0; i < t.nbytes; ++i) seen.insert(std::to_integer<int>(p[i]));
          CHECK(seen.size() >= std::min<std::size_t>(t.nbytes / 64, 200));
        }
      }
      ++checked;
    }
    CHECK(checked == index.tensors().size());
  }
}

TEST_CASE("synthetic: bad parameters and a damaged header are refused", "[synthetic]") {
  CHECK_THROWS_WITH(plugin_host().create_storage("synthetic", {{"seed", "-1"}}), Catch::Contains("seed"));
  CHECK_THROWS_WITH(plugin_host().create_storage("synthetic", {{"inner", "nonesuch"}}), Catch::Contains("nonesuch"));
  TempDir dir;
  const auto bad = dir.path() / "bad.safetensors";
  std::vector<std::byte> bytes(64, std::byte{0});
  bytes[0] = std::byte{0xff};  // a header of 255 bytes in a 64-byte file
  write_file(bad, bytes);
  auto synthetic = plugin_host().create_storage("synthetic", {});
  std::unique_ptr<k3::sdk::StorageFile> file;
  const auto st = synthetic->open(bad.string(), file);
  CHECK(st.code == k3::sdk::StatusCode::invalid_argument);
  CHECK_THAT(st.detail, Catch::Contains("bad.safetensors") && Catch::Contains("header length"));
  bytes[0] = std::byte{16};
  const std::string junk = "{\"a\": {\"dtype\":";
  std::memcpy(bytes.data() + 8, junk.data(), junk.size());
  write_file(bad, bytes);
  CHECK(synthetic->open(bad.string(), file).code == k3::sdk::StatusCode::invalid_argument);
}

namespace {

struct Routes final : k3::RoutingListener {
  std::map<std::size_t, std::set<std::vector<std::uint32_t>>> sets;  ///< per layer: the distinct top-k sets
  std::set<std::pair<std::size_t, std::uint32_t>> experts;           ///< (layer, expert) ever chosen
  void on_route(std::int64_t, std::size_t layer, std::span<const std::uint32_t> e) override {
    std::vector<std::uint32_t> v(e.begin(), e.end());
    std::sort(v.begin(), v.end());
    sets[layer].insert(v);
    for (auto x : e) experts.emplace(layer, x);
  }
};

struct Run {
  std::vector<float> logits;
  std::vector<std::uint32_t> ids;
  bool streaming = false;
  Routes routes;
};

Run run(const std::filesystem::path& dir, const k3::ModelSettings& s) {
  k3::PluginHost host;
  k3::Model model(dir.string(), host, s);
  Run r;
  r.streaming = model.streaming();
  k3::Session session(model, 64);
  session.set_routing_listener(&r.routes);
  const std::vector<std::uint32_t> prompt = {1, 7, 42, 3, 99, 5, 250, 17};
  std::vector<float> logits;
  session.feed(prompt, true, logits);
  r.logits = logits;
  const std::size_t V = static_cast<std::size_t>(model.config().vocab_size);
  for (int i = 0; i < 6; ++i) {
    const float* last = r.logits.data() + r.logits.size() - V;
    const auto next = static_cast<std::uint32_t>(std::max_element(last, last + V) - last);
    r.ids.push_back(next);
    session.feed({&next, 1}, false, logits);
    r.logits.insert(r.logits.end(), logits.begin(), logits.end());
  }
  return r;
}

/// Everything resident, or (streamed) a third of the trunk pinned, 3 expert slots and
/// lm_head streamed in chunks, as the streaming tests size them.
k3::ModelSettings settings(const std::string& geometry, bool streamed) {
  k3::ModelSettings s;
  s.storage = "synthetic";
  s.kernels = "scalar";
  s.threads = 2;
  s.memory.context = 64;
  s.memory.trunk_gb = 1000;
  s.memory.expert_cache_gb = 1000;
  if (!streamed) return s;
  k3::PlanInputs probe = s.memory;
  probe.available = 1ull << 40;
  const auto full = k3::plan_memory(k3::load_geometry(geometry).config, probe);
  std::uint64_t trunk = 0;
  for (auto b : full.layer_bytes) trunk += b;
  s.memory.trunk_gb = static_cast<double>(trunk) * 0.3 / 1e9;
  s.memory.expert_cache_gb = static_cast<double>(3 * full.expert_slot_bytes) / 1e9;
  s.memory.stream_embedding = true;
  return s;
}

}  // namespace

TEST_CASE("synthetic: the tiny model runs: finite, the same bits at every budget and inner backend, routing spread",
          "[synthetic]") {
  const auto& dir = headers_only("tiny");
  const Run resident = run(dir, settings("tiny", false));
  const Run streamed = run(dir, settings("tiny", true));
  k3::ModelSettings other_inner = settings("tiny", true);  // another inner backend, another stack
  other_inner.storage = "throttle";
  other_inner.storage_params = {{"inner", "synthetic"}, {"inner.inner", "mmap"}, {"bandwidth_mbps", "5000"}};
  const Run stacked = run(dir, other_inner);
  REQUIRE_FALSE(resident.streaming);
  REQUIRE(streamed.streaming);
  bool finite = true;
  for (float v : resident.logits) finite = finite && std::isfinite(v);
  CHECK(finite);
  REQUIRE(resident.logits.size() == streamed.logits.size());
  CHECK(resident.ids == streamed.ids);
  CHECK(std::memcmp(resident.logits.data(), streamed.logits.data(), resident.logits.size() * sizeof(float)) == 0);
  REQUIRE(stacked.logits.size() == resident.logits.size());
  CHECK(std::memcmp(resident.logits.data(), stacked.logits.data(), resident.logits.size() * sizeof(float)) == 0);
  // Routing is spread: at every MoE layer the 14 tokens do not all pick the same experts,
  // and more than a quarter of the experts are chosen somewhere. (Over zeros every token
  // would pick the same ones.)
  const auto cfg = k3::test::read_config(dir);
  REQUIRE_FALSE(resident.routes.sets.empty());
  for (const auto& [layer, sets] : resident.routes.sets) {
    CAPTURE(layer);
    CHECK(sets.size() > 1);
  }
  CHECK(resident.routes.experts.size() * 4 > resident.routes.sets.size() * static_cast<std::size_t>(cfg.num_experts));
  // The logits are not one constant row: the tokens differ.
  const std::size_t V = static_cast<std::size_t>(cfg.vocab_size);
  CHECK(std::memcmp(resident.logits.data(), resident.logits.data() + V, V * sizeof(float)) != 0);
}
