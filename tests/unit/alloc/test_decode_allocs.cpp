// The per-token path allocates nothing: after a session has prefilled and decoded its first
// token, further decode steps make no allocation through operator new on any thread (the
// OpenMP workers included), at 1 and 2 threads. The run buffers the plan sizes
// (maths/run_buffers.hpp) are what the forward pass works in. Streaming from a coded packed
// trunk too.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <thread>
#include <vector>

#include <k3/generate.hpp>
#include <k3/model.hpp>
#include <k3/pack_trunk.hpp>
#include <k3/plugin_host.hpp>

#include "counting_new.hpp"
#include "test_models.hpp"

namespace {

k3::test::ScratchCleanup cleanup;

k3::ModelSettings settings(int threads) {
  k3::ModelSettings s;
  s.kernels = "auto";
  s.threads = threads;
  s.memory.trunk_gb = 1000;
  s.memory.expert_cache_gb = 1000;
  s.memory.context = 64;
  s.memory.prefill_chunk = 4;
  return s;
}

struct DecodeCount {
  std::uint64_t allocations = 0;
  std::vector<std::uint32_t> ids;
  std::uint64_t trunk_bytes = 0, expert_bytes = 0;  ///< streamed during the counted steps
};

/// Prefill + one decode token (warm-up), then `steps` decode steps counted.
DecodeCount count_decode(k3::Model& model, int steps, const k3::SamplingSettings& sampling) {
  k3::Session session(model, 64);
  const std::uint32_t prompt[] = {1, 7, 42, 3, 99, 5, 250};
  std::vector<float> logits;
  for (std::size_t at = 0; at < std::size(prompt); at += 4)
    session.feed({prompt + at, std::min<std::size_t>(4, std::size(prompt) - at)}, false, logits);
  const auto V = static_cast<std::size_t>(model.config().vocab_size);
  k3::Sampler sampler(V);
  std::uint32_t next = sampler.sample(logits.data(), sampling, session.position());
  session.feed({&next, 1}, false, logits);  // the first decode token: warm-up

  DecodeCount out;
  out.ids.reserve(static_cast<std::size_t>(steps));
  const k3::StreamStats stats_before = model.stream_stats();
  const std::uint64_t before = k3::test::allocations();
  for (int i = 0; i < steps; ++i) {
    next = sampler.sample(logits.data(), sampling, session.position());
    out.ids.push_back(next);
    session.feed({&next, 1}, false, logits);
  }
  out.allocations = k3::test::allocations() - before;
  const k3::StreamStats stats_after = model.stream_stats();
  out.trunk_bytes = stats_after.trunk_bytes - stats_before.trunk_bytes;
  out.expert_bytes = stats_after.expert_bytes - stats_before.expert_bytes;
  return out;
}

}  // namespace

TEST_CASE("the counting operator new sees the library and other threads", "[alloc]") {
  const std::uint64_t a = k3::test::allocations();
  std::thread([] { std::vector<int> v(100); }).join();
  const std::uint64_t b = k3::test::allocations();
  CHECK(b - a >= 2);  // the thread's state and the vector
  k3::PluginHost host;
  k3::Model model(k3::test::test_model("tiny"), host, settings(1));
  CHECK(k3::test::allocations() - b > 100);  // loading a model allocates plenty, in libk3core
}

TEST_CASE("decoding a token allocates nothing (resident model)", "[alloc]") {
  k3::PluginHost host;
  for (const int threads : {1, 2}) {
    for (const double temperature : {0.0, 0.8}) {
      DYNAMIC_SECTION("threads " << threads << ", temperature " << temperature) {
        k3::Model model(k3::test::test_model("tiny"), host, settings(threads));
        REQUIRE_FALSE(model.streaming());
        k3::SamplingSettings sampling;
        sampling.temperature = temperature;
        sampling.top_k = 40;
        sampling.top_p = 0.9;
        sampling.seed = 7;
        const DecodeCount d = count_decode(model, 6, sampling);
        CHECK(d.ids.size() == 6);
        CHECK(d.allocations == 0);
      }
    }
  }
}

// Streamed: the trunk ring refills its slots from plans made at load, the expert cache's
// bookkeeping is flat and reserved, and the lru policy's index is sized by reset(), so a
// decode token allocates nothing either, whichever part streams. The budgets are tiny so
// that every token refills ring slots and evicts experts.
TEST_CASE("decoding a token allocates nothing (streamed model)", "[alloc][streamed]") {
  k3::PluginHost host;
  struct Budget {
    const char* what;
    double trunk_gb, expert_gb;
  };
  for (const Budget b : {Budget{"trunk streamed", 0.0001, 1000}, Budget{"experts streamed", 1000, 0.00001},
                         Budget{"both streamed", 0.0001, 0.00001}}) {
    for (const int threads : {1, 2}) {
      DYNAMIC_SECTION(b.what << ", threads " << threads) {
        k3::ModelSettings s = settings(threads);
        s.cache_policy = "lru";
        s.memory.trunk_gb = b.trunk_gb;
        s.memory.expert_cache_gb = b.expert_gb;
        k3::Model model(k3::test::test_model("tiny"), host, s);
        REQUIRE(model.streaming());
        const DecodeCount d = count_decode(model, 6, {});
        CHECK(d.ids.size() == 6);
        CHECK(d.allocations == 0);
        // The budgets do make the counted steps stream: trunk layers or experts are read.
        if (b.trunk_gb < 1) CHECK(d.trunk_bytes > 0);
        if (b.expert_gb < 1) CHECK(d.expert_bytes > 0);
      }
    }
  }
}

// With the router lookahead on, the predictions use run buffers sized by the plan and the
// prefetch batches job lists from the cache's pool: still nothing per token.
TEST_CASE("decoding a token allocates nothing (streamed model, router-lookahead prefetch)", "[alloc][streamed]") {
  k3::PluginHost host;
  for (const std::size_t depth : {1u, 2u}) {
    for (const int threads : {1, 2}) {
      DYNAMIC_SECTION("depth " << depth << ", threads " << threads) {
        k3::ModelSettings s = settings(threads);
        s.cache_policy = "lru";
        s.memory.trunk_gb = 1000;  // pinned: every router is at hand (a 1-slot ring has none ahead)
        s.memory.expert_cache_gb = 0.00001;
        s.prefetch_depth = depth;
        k3::Model model(k3::test::test_model("tiny"), host, s);
        REQUIRE(model.streaming());
        const DecodeCount d = count_decode(model, 6, {});
        CHECK(d.ids.size() == 6);
        CHECK(d.allocations == 0);
        CHECK(model.stream_stats().lookahead_predicted > 0);  // the lookahead did run
      }
    }
  }
}

// From a packed trunk a ring refill reads pieces and checks every byte against trunk.json
// (hashed while the next piece is read); from a coded one (pack-trunk --codec bf16-zstd or
// bf16-huff) it also decodes with a context and tables made at the first read: still
// nothing per token, the embedding rows and lm_head's row chunks checked too.
TEST_CASE("decoding a token allocates nothing (streamed from a coded packed trunk)", "[alloc][streamed][codec]") {
  k3::PackTrunkOptions o;
  o.model = k3::test::test_model("tiny");
  o.out = k3::test::scratch_dir() / "alloc-coded-trunk";
  o.force = true;
  o.codec = GENERATE(as<std::string>(), "none", "bf16-zstd", "bf16-huff");
  o.out += "-" + o.codec;
  const std::filesystem::path packed = k3::pack_trunk(o).dir;
  k3::PluginHost host;
  for (const int threads : {1, 2}) {
    DYNAMIC_SECTION(o.codec << ", threads " << threads) {
      k3::ModelSettings s = settings(threads);
      s.memory.trunk_gb = 0.0001;
      s.memory.stream_embedding = true;  // lm_head in row chunks, from the pack
      s.packed_trunk = packed;
      k3::Model model(k3::test::test_model("tiny"), host, s);
      REQUIRE(model.streaming());
      const DecodeCount d = count_decode(model, 6, {});
      CHECK(d.ids.size() == 6);
      CHECK(d.allocations == 0);
      CHECK(d.trunk_bytes > 0);
    }
  }
}
