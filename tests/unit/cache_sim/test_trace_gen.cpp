// The synthetic trace generator: shape, determinism, distinct experts per token-layer, and
// that its two knobs do what they say.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>

#include <k3/error.hpp>
#include <k3/sim.hpp>

#include "sim_test_util.hpp"

namespace {
k3::TraceGenSettings settings(double zipf, double reuse, std::uint64_t seed = 7) {
  k3::TraceGenSettings g;
  g.layers = 6;
  g.experts = 64;
  g.top_k = 4;
  g.tokens = 50;
  g.zipf = zipf;
  g.reuse = reuse;
  g.seed = seed;
  return g;
}
}  // namespace

TEST_CASE("trace-gen: shape, order and distinct experts per token-layer", "[tracegen]") {
  const k3::Trace t = k3::generate_trace(settings(1.0, 0.3));
  REQUIRE(t.records.size() == 50u * 6 * 4);
  CHECK(t.header.layers == 6);
  CHECK(t.header.experts_per_layer == 64);
  CHECK(t.header.top_k == 4);
  for (std::size_t i = 0; i < t.records.size(); i += 4) {
    const std::size_t group = i / 4;
    std::set<std::uint16_t> experts;
    for (std::size_t j = i; j < i + 4; ++j) {
      CHECK(t.records[j].position == group / 6);
      CHECK(t.records[j].layer == group % 6);
      experts.insert(t.records[j].expert);
    }
    CHECK(experts.size() == 4);
  }
}

TEST_CASE("trace-gen: the same seed gives the same trace, another seed another", "[tracegen]") {
  CHECK(k3::generate_trace(settings(1.0, 0.3)).records == k3::generate_trace(settings(1.0, 0.3)).records);
  CHECK(k3::generate_trace(settings(1.0, 0.3)).records != k3::generate_trace(settings(1.0, 0.3, 8)).records);
}

TEST_CASE("trace-gen: reuse 1 repeats the first token and zipf concentrates popularity", "[tracegen]") {
  const k3::Trace same = k3::generate_trace(settings(0.0, 1.0));
  for (std::size_t i = 6 * 4; i < same.records.size(); ++i)
    CHECK(same.records[i].expert == same.records[i - 24].expert);
  // Steeper Zipf, fewer distinct experts (uniform 64 experts x 50 tokens touches nearly all).
  const auto distinct = [](double zipf) {
    return k3::trace_stats(k3::generate_trace(settings(zipf, 0.0))).distinct_keys;
  };
  const auto flat = distinct(0.0), steep = distinct(2.0);
  CHECK(flat > 6 * 60);
  CHECK(steep < flat / 2);
}

TEST_CASE("trace-gen: bad settings and presets are refused", "[tracegen]") {
  auto g = settings(1.0, 0.3);
  g.top_k = 65;
  CHECK_THROWS_AS(k3::generate_trace(g), k3::UsageError);
  g = settings(1.0, 1.5);
  CHECK_THROWS_AS(k3::generate_trace(g), k3::UsageError);
  const auto dir = sim_test::scratch("preset");
  {
    std::ofstream(dir / "p.yaml") << "layers: 4\nzipf: 0.5\ntokens: 9\n";
    std::ofstream(dir / "bad.yaml") << "layers: 4\nzpif: 0.5\n";
  }
  const auto p = k3::load_trace_preset(dir / "p.yaml", settings(1.0, 0.3));
  CHECK(p.layers == 4);
  CHECK(p.zipf == 0.5);
  CHECK(p.tokens == 9);
  CHECK(p.experts == 64);  // not in the file: kept
  CHECK_THROWS_WITH(k3::load_trace_preset(dir / "bad.yaml", {}), Catch::Contains("bad.yaml:2:1: zpif"));
}

TEST_CASE("trace-gen: the calibrated preset in configs/traces parses", "[tracegen]") {
  const auto preset = std::filesystem::path(K3_SOURCE_DIR) / "configs" / "traces" / "k3-calibrated.yaml";
  const auto g = k3::load_trace_preset(preset, {});
  CHECK(g.layers == 92);
  CHECK(g.experts == 896);
  CHECK(g.top_k == 16);
  CHECK(g.tokens == 12);
  CHECK(g.recompute_prompt == 5);
  // The published trace's size: 5 + 6 + ... + 12 = 68 forwards of 92 x 16 requests.
  CHECK(k3::generate_trace(g).records.size() == 100096);
}

TEST_CASE("trace-gen: full-recompute emulation replays every earlier position each step", "[tracegen]") {
  auto g = settings(1.0, 0.3);
  g.tokens = 4;
  const k3::Trace once = k3::generate_trace(g);  // positions 0..3, one forward each
  g.recompute_prompt = 2;
  const k3::Trace re = k3::generate_trace(g);
  // Steps feed positions 0-1, 0-2, 0-3: 2 + 3 + 4 = 9 forwards of 6 layers x top-4.
  const std::size_t per = 6 * 4;
  REQUIRE(re.records.size() == 9 * per);
  std::size_t at = 0;
  for (std::size_t end = 2; end <= 4; ++end)
    for (std::size_t i = 0; i < end * per; ++i) CHECK(re.records[at++] == once.records[i]);
  CHECK(k3::trace_stats(re).tokens == 9);
  g.recompute_prompt = 5;
  CHECK_THROWS_AS(k3::generate_trace(g), k3::UsageError);
}
