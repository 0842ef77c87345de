// Streaming is bit-identical to the resident model: budgets scaled down so that the trunk
// ring, the expert cache and (ultra) the lm_head chunks really stream on the tiny and demo
// models; across cache policies and every storage plugin the host finds (with the faulty
// decorator injecting recoverable faults); peak RSS within the plan; an unrecoverable expert
// fault finishes the run and names the expert.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include <k3/error.hpp>
#include <k3/geometry.hpp>
#include <k3/make_model.hpp>
#include <k3/model.hpp>
#include <k3/plan.hpp>
#include <k3/plugin_host.hpp>

#include "local_storage.hpp"
#include "loopback_http.hpp"
#include "sanitizer.hpp"
#include "test_models.hpp"

namespace {

k3::test::ScratchCleanup cleanup;

struct RunResult {
  std::vector<float> logits;  ///< prompt logits (all positions) then one row per decode step
  std::vector<std::uint32_t> ids;
  k3::StreamStats before_decode, after;
  bool streaming = false;
  k3::MemoryPlan plan;
};

/// Prefill in chunks of 3 with all positions, then greedy decode `steps` tokens.
/// `uri`: a checkpoint folder, or its URL for the http backend.
RunResult run(const std::string& uri, k3::PluginHost& host, const k3::ModelSettings& s, int steps) {
  k3::Model model(uri, host, s);
  RunResult r;
  r.streaming = model.streaming();
  r.plan = model.plan();
  k3::Session session(model, 64);
  const std::uint32_t prompt[] = {1, 7, 42, 3, 99, 5, 250};
  std::vector<float> logits;
  for (std::size_t at = 0; at < std::size(prompt); at += 3) {
    const std::size_t n = std::min<std::size_t>(3, std::size(prompt) - at);
    session.feed({prompt + at, n}, true, logits);
    r.logits.insert(r.logits.end(), logits.begin(), logits.end());
  }
  r.before_decode = model.stream_stats();
  const std::size_t V = static_cast<std::size_t>(model.config().vocab_size);
  for (int i = 0; i < steps; ++i) {
    const float* last = r.logits.data() + r.logits.size() - V;
    const auto next = static_cast<std::uint32_t>(std::max_element(last, last + V) - last);
    r.ids.push_back(next);
    session.feed({&next, 1}, false, logits);
    r.logits.insert(r.logits.end(), logits.begin(), logits.end());
  }
  r.after = model.stream_stats();
  return r;
}
RunResult run(const std::filesystem::path& dir, k3::PluginHost& host, const k3::ModelSettings& s, int steps) {
  return run(dir.string(), host, s, steps);
}

/// nginx serving `dir` on loopback for the http backend; nullptr (after a WARN) when it
/// cannot run here: a SKIP, never a pass.
std::unique_ptr<k3::test::LoopbackHttp> serve_over_http(const std::filesystem::path& dir, const std::string& name) {
  auto server = std::make_unique<k3::test::LoopbackHttp>(dir, k3::test::scratch_dir() / ("nginx-" + name));
  if (server->url().empty()) {
    WARN("SKIP storage plugin http: " << server->skip_reason());
    return nullptr;
  }
  return server;
}

k3::ModelSettings resident_settings() {
  k3::ModelSettings s;
  s.kernels = "scalar";
  s.threads = 2;
  s.memory.trunk_gb = 1000;
  s.memory.expert_cache_gb = 1000;
  s.memory.context = 64;
  return s;
}

/// Budgets that make `geometry` stream: `pin_share` of the trunk bytes, and an expert cache
/// of `slots` slots; `ultra` also streams lm_head.
k3::ModelSettings streamed_settings(const std::string& geometry, double pin_share, std::uint64_t slots, bool ultra) {
  k3::ModelSettings s = resident_settings();
  k3::PlanInputs probe = s.memory;
  probe.available = 1ull << 40;
  const auto full = k3::plan_memory(k3::load_geometry(geometry).config, probe);
  const std::uint64_t trunk = std::accumulate(full.layer_bytes.begin(), full.layer_bytes.end(), std::uint64_t{0});
  s.memory.trunk_gb = static_cast<double>(trunk) * pin_share / 1e9;
  s.memory.expert_cache_gb = static_cast<double>(slots * full.expert_slot_bytes) / 1e9;
  s.memory.stream_embedding = ultra;
  return s;
}

bool has_plugin(const k3::PluginHost& host, k3::PluginKind kind, const std::string& name) {
  for (const auto& p : host.plugins())
    if (p.kind == kind && p.name == name) return true;
  return false;
}

void require_same(const RunResult& a, const RunResult& b) {
  REQUIRE(a.logits.size() == b.logits.size());
  CHECK(a.ids == b.ids);
  CHECK(std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)) == 0);
}

void require_streamed(const RunResult& r) {
  CHECK(r.streaming);
  CHECK(r.plan.streams_trunk());
  CHECK(r.plan.streams_experts());
  // Storage was read during decode, not only at load.
  CHECK(r.after.trunk_bytes > r.before_decode.trunk_bytes);
  CHECK(r.after.expert_bytes > r.before_decode.expert_bytes);
  CHECK(r.after.table_bytes > r.before_decode.table_bytes);
  CHECK(r.after.expert_requests > r.before_decode.expert_requests);
  CHECK(r.after.expert_failures.empty());
}

std::uint64_t status_kb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string k;
  std::uint64_t v = 0;
  std::string rest;
  while (in >> k) {
    if (k == key) {
      in >> v;
      return v;
    }
    std::getline(in, rest);
  }
  return 0;
}

}  // namespace

TEST_CASE("tiny: streamed presets are bit-identical to resident, across cache policies") {
  const auto& dir = k3::test::test_model("tiny");
  k3::PluginHost host;
  const RunResult base = run(dir, host, resident_settings(), 6);
  REQUIRE_FALSE(base.streaming);

  struct Preset {
    const char* name;
    double pin_share;
    std::uint64_t slots;
    bool ultra;
  };
  // laptop-like: some layers pinned, a small cache; ultra-like: nothing pinned, top-k slots,
  // lm_head in chunks.
  for (const Preset& pr : {Preset{"laptop", 0.4, 5, false}, Preset{"ultra", 0.0, 2, true}}) {
    for (const char* policy : {"lru", "s3fifo", "lfu", "sieve", "lecar", "nextuse"}) {
      if (!has_plugin(host, k3::PluginKind::cache, policy)) {
        WARN("SKIP cache policy " << policy << ": plugin not built");
        continue;
      }
      CAPTURE(pr.name, policy);
      k3::ModelSettings s = streamed_settings("tiny", pr.pin_share, pr.slots, pr.ultra);
      s.cache_policy = policy;
      const RunResult r = run(dir, host, s, 6);
      require_streamed(r);
      CHECK((pr.pin_share == 0.0) == (r.plan.pinned_count == 0));
      CHECK((r.plan.lm_head_chunk_rows > 0) == pr.ultra);
      require_same(base, r);
    }
  }
}

TEST_CASE("tiny: streamed output is the same through every storage plugin, faulty with transient faults") {
  const auto& dir = k3::test::test_model("tiny");
  k3::PluginHost host;
  const RunResult base = run(dir, host, resident_settings(), 4);
  bool saw_faulty = false;
  std::unique_ptr<k3::test::LoopbackHttp> server;
  for (const auto& p : host.plugins()) {
    // synthetic replaces the tensor bytes by design: its own tests (storage_synthetic).
    if (p.kind != k3::PluginKind::storage || p.name == "synthetic") continue;
    k3::ModelSettings s = streamed_settings("tiny", 0.3, 3, false);
    s.storage = p.name;
    std::string uri = dir.string();
    if (p.name == "http") {  // the same folder served by nginx on loopback
      server = serve_over_http(dir, "every-plugin");
      if (!server) continue;
      uri = server->url();
      s.storage_params = {{"connections", "4"}};
    }
    if (p.name == "faulty") {
      saw_faulty = true;
      s.storage_params = {{"seed", "7"}, {"eio_rate", "0.05"}, {"short_read_rate", "0.05"}, {"transient", "true"}};
    } else if (p.name == "throttle") {
      s.storage_params = {{"bandwidth_mbps", "2000"}};
    } else if (p.name == "tiered") {  // over posix; run twice below: filling, then served from the tier
      s.storage_params = {{"inner", "posix"}, {"dir", (k3::test::scratch_dir() / "tier").string()}, {"block_kb", "8"}};
    }
    CAPTURE(p.name);
    RunResult r;
    try {
      r = run(uri, host, s, 4);
    } catch (const k3::UsageError& e) {
      // A decorator whose parameters this test does not know: say so, do not pass silently.
      WARN("SKIP storage plugin " << p.name << ": " << e.what());
      continue;
    }
    require_streamed(r);
    require_same(base, r);
    if (p.name == "tiered") {
      const RunResult warm = run(uri, host, s, 4);
      require_same(base, warm);
    }
  }
  if (!saw_faulty) WARN("SKIP recoverable faults: the faulty storage plugin is not built");
}

TEST_CASE(
    "tiny: over loopback http (nginx) and tiered(http), every preset budget and chunking is bit-identical to resident "
    "posix") {
  const auto& dir = k3::test::test_model("tiny");
  k3::PluginHost host;
  if (!has_plugin(host, k3::PluginKind::storage, "http")) {
    WARN("SKIP storage plugin http: not built (no libcurl)");
    return;
  }
  auto server = serve_over_http(dir, "budgets");
  if (!server) return;
  const RunResult base = run(dir, host, resident_settings(), 5);
  struct Budget {
    const char* name;
    double pin_share;
    std::uint64_t slots;
    bool ultra;
    bool split;
  };
  for (const Budget& b : {Budget{"resident", -1, 0, false, false}, Budget{"laptop", 0.4, 5, false, false},
                          Budget{"ultra", 0.0, 2, true, false}, Budget{"ultra split", 0.0, 2, true, true}}) {
    // One connection, small ranges and HTTP/1.1 once (each range is a thread hand-off,
    // slow on a loaded machine); the defaults at every budget.
    for (const char* params : {"default", "one connection, 4 KiB ranges, HTTP/1.1"}) {
      if (std::string(params) != "default" && std::string(b.name) != "ultra split") continue;
      CAPTURE(b.name, params);
      k3::ModelSettings s = b.pin_share < 0 ? resident_settings()
                                            : streamed_settings("tiny", b.pin_share, b.slots, b.ultra);
      if (b.split) {
        s.memory.split_dense_ffn = k3::PlanInputs::SplitDenseFfn::on;
        s.memory.row_chunk_bytes = 3000;
      }
      s.storage = "http";
      if (std::string(params) != "default")
        s.storage_params = {{"connections", "1"}, {"max_range_bytes", "4096"}, {"http_version", "1.1"}};
      const RunResult r = run(server->url(), host, s, 5);
      if (b.pin_share >= 0) require_streamed(r);
      require_same(base, r);
    }
    // tiered(http): a local tier in front of the server, filled by the first run and served
    // by the second; both are the resident bits. A small cap makes the tier evict as it goes.
    if (!has_plugin(host, k3::PluginKind::storage, "tiered")) continue;
    for (const char* cap : {"0", "1"}) {
      CAPTURE(b.name, cap);
      k3::ModelSettings s = b.pin_share < 0 ? resident_settings()
                                            : streamed_settings("tiny", b.pin_share, b.slots, b.ultra);
      if (b.split) {
        s.memory.split_dense_ffn = k3::PlanInputs::SplitDenseFfn::on;
        s.memory.row_chunk_bytes = 3000;
      }
      const auto tier = k3::test::scratch_dir() / ("tier-http-" + std::string(b.name) + "-" + cap);
      std::filesystem::remove_all(tier);
      s.storage = "tiered";
      s.storage_params = {
          {"inner", "http"}, {"inner.connections", "2"}, {"dir", tier.string()}, {"block_kb", "16"}, {"max_mb", cap}};
      for (const char* pass : {"cold", "warm"}) {
        CAPTURE(pass);
        const RunResult r = run(server->url(), host, s, 5);
        if (b.pin_share >= 0) require_streamed(r);
        require_same(base, r);
      }
    }
  }
}

TEST_CASE("tiny: an unrecoverable expert read finishes the run and names the layer and expert") {
  k3::PluginHost host;
  if (!has_plugin(host, k3::PluginKind::storage, "faulty")) {
    WARN("SKIP exit-4 path: the faulty storage plugin is not built");
    return;
  }
  // tiny in ONE shard: faulty's offsets apply to every file, so with one file an expert
  // offset is covered by nothing else.
  const auto geo = k3::test::scratch_dir() / "tiny-one-shard.yaml";
  {
    std::ifstream in(std::filesystem::path(K3_SOURCE_DIR) / "configs/models/tiny.yaml");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto at = text.find("shard_size: 64KiB");
    REQUIRE(at != std::string::npos);
    text.replace(at, 17, "shard_size: 64MiB");
    std::ofstream(geo) << text;
  }
  const auto dir = k3::test::scratch_dir() / "model-tiny-one-shard";
  k3::MakeModelOptions mo;
  mo.out = dir;
  mo.force = true;
  k3::make_model(k3::load_geometry(geo.string()), mo);
  // Fail one routed expert's w2.weight_packed for good: layer 1, every expert (the router's
  // choice is not known in advance, so poison all of layer 1's experts' first byte of w2).
  const auto index = k3::test::open_index(dir);
  const auto c = k3::load_geometry("tiny").config;
  std::string offsets;
  // faulty's offsets apply to every shard: use only offsets that no non-expert tensor of
  // any shard covers, so just the expert reads fail.
  auto covered_by_trunk = [&](std::uint64_t off) {
    for (const auto& t : index.tensors())
      if (t.name.find(".experts.") == std::string::npos && t.offset <= off && off < t.offset + t.nbytes) return true;
    return false;
  };
  for (std::int64_t layer = c.first_k_dense_replace; layer < c.num_hidden_layers; ++layer)
    for (std::int64_t e = 0; e < c.num_experts; ++e)
      for (int w = 1; w <= 3; ++w) {
        const auto* t = index.find(k3::tensor_names::expert(layer, e, w, false));
        REQUIRE(t != nullptr);
        for (std::uint64_t off = t->offset; off < t->offset + t->nbytes; off += 64)
          if (!covered_by_trunk(off)) {
            offsets += (offsets.empty() ? "" : ",") + std::to_string(off);
            break;
          }
      }
  REQUIRE_FALSE(offsets.empty());
  k3::ModelSettings s = streamed_settings("tiny", 0.3, 3, false);
  s.storage = "faulty";
  s.storage_params = {{"fail_offsets", offsets}};
  RunResult r;
  REQUIRE_NOTHROW(r = run(dir, host, s, 3));  // the run finishes
  REQUIRE_FALSE(r.after.expert_failures.empty());
  const std::string& first = r.after.expert_failures.front();
  CHECK(first.rfind("layer ", 0) == 0);
  CHECK(first.find(" expert ") != std::string::npos);
  CHECK(first.find("attempts") != std::string::npos);
}

TEST_CASE("demo: laptop-scaled streaming is bit-identical and peak RSS stays within the plan") {
  const auto& dir = k3::test::test_model("demo");
  k3::PluginHost host;
  k3::ModelSettings s = streamed_settings("demo", 0.25, 12, false);
  s.kernels = "auto";
  // Peak RSS of the streamed run alone: reset the high-water mark (Linux >= 4.0), measure
  // from the current RSS.
  {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";
  }
  const std::uint64_t rss0 = status_kb("VmRSS:") * 1024;
  RunResult r = run(dir, host, s, 3);
  const std::uint64_t hwm = status_kb("VmHWM:") * 1024;
  require_streamed(r);
  INFO("peak RSS growth " << (hwm - rss0) << " bytes, plan total " << r.plan.total);
  // Under ASan the bound is not checked (tests/support/sanitizer.hpp); bit identity still is.
  if (!k3::test::under_asan && hwm >= rss0 && status_kb("VmHWM:") != 0) CHECK(hwm - rss0 <= r.plan.total);

  k3::ModelSettings rs = resident_settings();
  rs.kernels = "auto";
  const RunResult base = run(dir, host, rs, 3);
  CHECK(base.plan.total > r.plan.total);
  require_same(base, r);
}

TEST_CASE("split dense layers: the FFN read in row chunks is bit-identical, with and without a streamed lm_head") {
  for (const char* geometry : {"tiny", "demo"}) {
    const auto& dir = k3::test::test_model(geometry);
    k3::PluginHost host;
    k3::ModelSettings rs = resident_settings();
    rs.kernels = "auto";
    const RunResult base = run(dir, host, rs, 3);
    for (bool ultra : {false, true}) {
      CAPTURE(geometry, ultra);
      k3::ModelSettings s = streamed_settings(geometry, 0.0, 8, ultra);
      s.kernels = "auto";
      s.memory.split_dense_ffn = k3::PlanInputs::SplitDenseFfn::on;
      // Several chunks per matrix, so both buffers take turns (tiny: ~23 rows, demo: ~260).
      s.memory.row_chunk_bytes = std::string(geometry) == "tiny" ? 3000 : 400000;
      const RunResult r = run(dir, host, s, 3);
      require_streamed(r);
      REQUIRE(r.plan.split_dense_ffn);
      CHECK(r.plan.split_layers == 1);
      // The ring no longer holds the FFN: its slot is the largest unpinned core.
      CHECK(r.plan.ring_slot_bytes < *std::max_element(r.plan.layer_bytes.begin(), r.plan.layer_bytes.end()));
      require_same(base, r);
      // Every token streams layer 0's FFN again: trunk bytes per decode step include it.
      const auto& c = k3::load_geometry(geometry).config;
      const std::uint64_t ffn = 3ull * static_cast<std::uint64_t>(c.intermediate_size * c.hidden_size) * 2;
      CHECK(r.after.trunk_bytes - r.before_decode.trunk_bytes >= 3 * ffn);
    }
  }
}

TEST_CASE("dtype mixes: compact and f32 give the release mix's bits, resident, streamed and split, every kernel set") {
  // The same numbers stored as BF16 or F32 (norms and biases widened once at load, F32
  // matrices through the kernels' F32 product) must give the same logits bits; tiny only,
  // so the second and third mix add little test time.
  k3::PluginHost host;
  const RunResult base = run(k3::test::test_model("tiny"), host, resident_settings(), 3);
  std::vector<std::string> kernel_sets;
  for (const auto& p : host.plugins())
    if (p.kind == k3::PluginKind::kernels && p.score > 0) kernel_sets.push_back(p.name);
  // The mixes really differ on disk: compact < release < f32 in shard bytes.
  auto shard_bytes = [](const std::filesystem::path& dir) {
    std::uint64_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().extension() == ".safetensors") n += e.file_size();
    return n;
  };
  const std::uint64_t release_bytes = shard_bytes(k3::test::test_model("tiny"));
  CHECK(shard_bytes(k3::test::test_model("tiny", k3::DTypeMix::compact)) < release_bytes);
  CHECK(shard_bytes(k3::test::test_model("tiny", k3::DTypeMix::f32)) > release_bytes);
  for (k3::DTypeMix mix : {k3::DTypeMix::compact, k3::DTypeMix::f32}) {
    const auto& dir = k3::test::test_model("tiny", mix);
    for (const std::string& kernels : kernel_sets)
      for (int threads : {1, 2}) {
        CAPTURE(k3::to_string(mix), kernels, threads);
        k3::ModelSettings s = resident_settings();
        s.kernels = kernels;
        s.threads = threads;
        require_same(base, run(dir, host, s, 3));
      }
    for (bool split : {false, true}) {
      CAPTURE(k3::to_string(mix), split);
      // ultra-like: nothing pinned, top-k slots, lm_head (and a split FFN) in row chunks,
      // embedding rows read per token.
      k3::ModelSettings s = streamed_settings("tiny", split ? 0.0 : 0.4, split ? 2 : 5, split);
      if (split) {
        s.memory.split_dense_ffn = k3::PlanInputs::SplitDenseFfn::on;
        s.memory.row_chunk_bytes = 3000;
      }
      const RunResult r = run(dir, host, s, 3);
      require_streamed(r);
      require_same(base, r);
    }
  }
}

TEST_CASE("tiny: the I/O wait is split: the waits for routed experts are counted apart from the trunk's") {
  const auto& dir = k3::test::test_model("tiny");
  k3::PluginHost host;
  if (!has_plugin(host, k3::PluginKind::storage, "throttle")) {
    WARN("SKIP: the throttle storage plugin is not built");
    return;
  }
  // A slow disk, so that the compute thread waits for what it reads.
  const auto slow = [](k3::ModelSettings s) {
    s.storage = "throttle";
    s.storage_params = {{"bandwidth_mbps", "4"}};
    return s;
  };
  const RunResult base = run(dir, host, resident_settings(), 3);
  // The trunk pinned whole, the experts streamed: nearly every wait is one for experts.
  const RunResult experts = run(dir, host, slow(streamed_settings("tiny", 1.0, 3, false)), 3);
  require_same(base, experts);
  CHECK_FALSE(experts.plan.streams_trunk());
  REQUIRE(experts.plan.streams_experts());
  const k3::StreamStats& e = experts.after;
  CHECK(e.expert_wait_seconds > 0);
  CHECK(e.expert_wait_seconds <= e.io_wait_seconds);
  // What is not an expert wait here is the embedding rows' (read on demand): a sliver.
  CHECK(e.io_wait_seconds - e.expert_wait_seconds < 0.1 * e.io_wait_seconds);
  // The trunk streamed too: its waits count in the whole, not in the experts'.
  const RunResult both = run(dir, host, slow(streamed_settings("tiny", 0.0, 3, false)), 3);
  require_same(base, both);
  REQUIRE(both.plan.streams_trunk());
  const k3::StreamStats& b = both.after;
  CHECK(b.expert_wait_seconds > 0);
  CHECK(b.io_wait_seconds - b.expert_wait_seconds > 0.01);
  CHECK(b.io_wait_seconds - b.expert_wait_seconds > 3 * (e.io_wait_seconds - e.expert_wait_seconds));
}
