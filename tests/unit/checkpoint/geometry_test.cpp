// Geometry files: all shipped geometries load; the k3 geometry has the released sizes; bad
// geometry files are refused with file:line:col; and the full k3 layout written as headers
// only indexes fast.
#include <chrono>
#include <cstdio>
#include <ctime>

#include <catch2/catch.hpp>

#include <k3/checkpoint.hpp>
#include <k3/error.hpp>
#include <k3/geometry.hpp>
#include <k3/make_model.hpp>

#include "checkpoint_test_util.hpp"
#include "local_storage.hpp"
#include "sanitizer.hpp"

namespace fs = std::filesystem;
using namespace k3;
using namespace k3::test;

TEST_CASE("the shipped geometries load and satisfy the brief's shape constraints", "[geometry]") {
  for (const std::string name : {"tiny", "tiny2", "demo", "k3"}) {
    INFO(name);
    const auto g = load_geometry(name);
    const auto& c = g.config;
    CHECK(g.name == name);
    CHECK(c.vocab_size == g.writer.tokenizer_ranks + 256);
    CHECK(c.bos_token_id == g.writer.tokenizer_ranks);
    CHECK(c.eos_token_id == g.writer.tokenizer_ranks + 2);
    CHECK(c.kda_num_heads <= c.kda_head_dim);
    CHECK(c.moe_intermediate_size % 32 == 0);
    CHECK(c.routed_expert_hidden_size % 32 == 0);
    CHECK(c.first_k_dense_replace >= 1);
    std::int64_t kda = 0, mla = 0;
    for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) (c.is_mla(i) ? mla : kda) += 1;
    CHECK(kda > 0);
    CHECK(mla > 0);
    const auto blocks = (c.num_hidden_layers + c.attn_res_block_size - 1) / c.attn_res_block_size;
    CHECK(blocks >= 2);  // several AttnRes blocks
  }
  // tiny's map is not every-4th, and demo streams: many experts, a small top-k.
  const auto tiny = load_geometry("tiny").config;
  CHECK(tiny.mla_layers == std::vector<std::int64_t>{1, 4, 5});
  const auto demo = load_geometry("demo").config;
  CHECK(demo.num_experts >= 64);
  CHECK(demo.num_experts_per_token * 8 <= demo.num_experts);
  const auto demo_bytes = geometry_census(demo).bytes;
  CHECK(demo_bytes >= 300'000'000);
  CHECK(demo_bytes <= 500'000'000);
}

TEST_CASE("the k3 geometry has the released tensor count and sizes", "[geometry]") {
  const auto c = load_geometry("k3").config;
  CHECK(c.mla_layers.size() == 24);
  CHECK(c.is_mla(3));
  CHECK(c.is_mla(91));
  CHECK(c.is_mla(92));
  CHECK_FALSE(c.is_mla(90));
  const auto s = geometry_census(c);
  // Counted by hand from docs/model-spec.md §2: 5 model-level tensors, 6 per layer, 14 per KDA
  // layer (69), 8 per MLA layer (24), 3 for the dense MLP, 8 + 896 × 6 per MoE layer (92).
  CHECK(s.tensors == 5 + 93 * 6 + 69 * 14 + 24 * 8 + 3 + 92 * (8 + 896 * 6));
  CHECK(s.tensors == 497'052);  // the release's 497,220 minus its 168 vision tensors
  // docs/model-spec.md §6: one routed expert is 17,547,264 bytes; 82,432 of them.
  CHECK(s.bytes_per_expert == 17'547'264);
  CHECK(s.expert_bytes == 82'432ull * 17'547'264ull);
  // the C99 reference engine kimi-k3-in-c, its parameter census: 56,743,648,000 always-active parameters.
  CHECK(s.params - s.expert_params == 56'743'648'000ull);
  CHECK(s.expert_params == 82'432ull * 3 * 3072 * 3584);
}

TEST_CASE("bad geometry files are refused with file:line:col", "[geometry][bad_input]") {
  const fs::path dir = fresh_dir("bad-geometry");
  const std::string good = read_file(fs::path(K3_SOURCE_DIR) / "configs/models/tiny.yaml");
  struct Case {
    std::string from, to, what;
  };
  const std::vector<Case> cases = {
      {"  hidden_size: 64", "  hiden_size: 64", "text_config.hiden_size: unknown key"},
      {"  vocab_size: 768 ", "  vocab_size: 769 ", "tokenizer_ranks + 256"},
      {"  eos_token_id: 514", "  eos_token_id: 513", "<|end_of_msg|>"},
      {"    full_attn_layers: [2, 5, 6]", "    full_attn_layers: [2, 5, 60]", "outside 1..6"},
      {"  shard_size: 64KiB", "  shard_size: 64kb", "writer.shard_size"},
      {"  seed: 1\n", "  seed: one\n", "writer.seed"},
      {"  dtypes: release", "  dtypes: bf16", "writer.dtypes: 'bf16' is not a dtype mix"},
  };
  for (const auto& c : cases) {
    INFO(c.to);
    const fs::path f = dir / "g.yaml";
    write_file(f, replace_once(good, c.from, c.to));
    try {
      (void)load_geometry(f.string());
      FAIL("accepted");
    } catch (const UsageError& e) {
      CHECK_THAT(e.what(), Catch::Contains(f.string() + ":") && Catch::Contains(c.what));
    }
  }
  CHECK_THROWS_WITH(load_geometry("no-such-geometry"), Catch::Contains("not found"));
}

TEST_CASE("k3 --headers-only: ~497,000 tensors in ~96 sparse shards, indexed in well under a second",
          "[geometry][index][bench]") {
  const fs::path out = fresh_dir("k3-headers") / "model";
  MakeModelOptions o;
  o.out = out;
  o.headers_only = true;
  const auto r = make_model(load_geometry("k3"), o);
  CHECK(r.tensors == 497'052);
  CHECK(r.shards >= 90);
  CHECK(r.shards <= 100);
  // Sparse: the files claim 1.56 TB but occupy only their headers.
  std::uint64_t apparent = 0;
  for (const auto& f : shard_files(out)) apparent += fs::file_size(f);
  CHECK(apparent > 1'500'000'000'000ull);
  CHECK(fs::space(out).available > 0);

  const auto t0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  const auto index = k3::test::open_index(out);
  const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(index.tensors().size() == 497'052);
  CHECK(index.files().size() == r.shards);
  std::printf("k3 headers-only: written in %.2f s; %zu tensors in %zu shards indexed in %.3f s wall, %.3f s CPU\n",
              r.seconds, index.tensors().size(), index.files().size(), secs, cpu);
  // Wall time depends on what else runs on the machine; CPU time (both threads) catches an
  // algorithmic regression without flaking on a loaded CI host.
  if (secs > 1.0) WARN("indexing took " << secs << " s wall (" << cpu << " s CPU): is the machine loaded?");
  // Under the sanitizers (shadow memory on every access, coverage counters on every edge)
  // the same work takes about 10x the CPU; the bound still catches a quadratic index there.
  CHECK(cpu < (k3::test::under_asan ? 40.0 : 4.0));
  fs::remove_all(out);
}
