// k3::perplexity: the window plan by hand, the fp64 score by hand, the sliding windows
// against one whole-sequence feed, and bit identity of the result across kernel sets,
// thread counts, chunkings and a streamed budget (docs/model-spec.md §5). The PyTorch
// reference's perplexity is compared by tests/support/perplexity_oracle.py (the
// perplexity-oracle test of tests/cmake/cli_perplexity.cmake).
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include <k3/error.hpp>
#include <k3/geometry.hpp>
#include <k3/model.hpp>
#include <k3/perplexity.hpp>
#include <k3/plan.hpp>
#include <k3/plugin_host.hpp>

#include "test_models.hpp"

namespace {

using k3::test::test_model;

k3::test::ScratchCleanup cleanup;

std::vector<std::uint32_t> some_ids(const k3::ModelConfig& c, std::size_t n) {
  std::vector<std::uint32_t> ids;
  std::uint64_t x = 987654321;
  for (std::size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    ids.push_back(static_cast<std::uint32_t>((x >> 33) % static_cast<std::uint64_t>(c.vocab_size)));
  }
  return ids;
}

k3::ModelSettings resident(const std::string& kernels, int threads) {
  k3::ModelSettings s;
  s.kernels = kernels;
  s.threads = threads;
  s.memory.trunk_gb = 1000;
  s.memory.expert_cache_gb = 1000;
  s.memory.context = 64;
  return s;
}

/// A third of the trunk pinned and a three-slot expert cache: tiny streams both.
k3::ModelSettings streamed() {
  k3::ModelSettings s = resident("scalar", 2);
  k3::PlanInputs probe = s.memory;
  probe.available = 1ull << 40;
  const auto full = k3::plan_memory(k3::load_geometry("tiny").config, probe);
  const std::uint64_t trunk = std::accumulate(full.layer_bytes.begin(), full.layer_bytes.end(), std::uint64_t{0});
  s.memory.trunk_gb = static_cast<double>(trunk) * 0.3 / 1e9;
  s.memory.expert_cache_gb = static_cast<double>(3 * full.expert_slot_bytes) / 1e9;
  return s;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

k3::PerplexitySettings windows_of(std::int64_t window, std::int64_t stride, std::int64_t chunk) {
  k3::PerplexitySettings s;
  s.window = window;
  s.stride = stride;
  s.chunk = chunk;
  return s;
}

}  // namespace

TEST_CASE("the windows overlap so that every id but the first is scored exactly once", "[perplexity]") {
  // 10 ids, windows of 4 every 2: [0,4) scores 1..3, then each window its last 2 ids.
  const auto w = k3::perplexity_windows(10, 4, 2);
  REQUIRE(w.size() == 4);
  CHECK((w[0].start == 0 && w[0].end == 4 && w[0].first_scored == 1));
  CHECK((w[1].start == 2 && w[1].end == 6 && w[1].first_scored == 4));
  CHECK((w[2].start == 4 && w[2].end == 8 && w[2].first_scored == 6));
  CHECK((w[3].start == 6 && w[3].end == 10 && w[3].first_scored == 8));
  // The last window is cut at the end: 7 ids, windows of 4 every 3.
  const auto cut = k3::perplexity_windows(7, 4, 3);
  REQUIRE(cut.size() == 2);
  CHECK((cut[1].start == 3 && cut[1].end == 7 && cut[1].first_scored == 4));
  // One window holds it all.
  const auto one = k3::perplexity_windows(5, 8, 4);
  REQUIRE(one.size() == 1);
  CHECK((one[0].start == 0 && one[0].end == 5 && one[0].first_scored == 1));
  CHECK(k3::perplexity_windows(1, 4, 2).empty());
  // Every id 1..n-1 exactly once, and always with its predecessor inside the window.
  for (std::int64_t n : {2, 3, 17, 100})
    for (std::int64_t window : {2, 3, 8, 33})
      for (std::int64_t stride = 1; stride < window; stride += 2) {
        std::vector<int> seen(static_cast<std::size_t>(n), 0);
        for (const auto& x : k3::perplexity_windows(n, window, stride)) {
          CHECK(x.first_scored > x.start);
          for (auto i = x.first_scored; i < x.end; ++i) ++seen[static_cast<std::size_t>(i)];
        }
        CHECK(seen[0] == 0);
        for (std::int64_t i = 1; i < n; ++i) CHECK(seen[static_cast<std::size_t>(i)] == 1);
      }
}

TEST_CASE("window settings that would leave ids unscored are refused", "[perplexity][errors]") {
  CHECK_THROWS_AS(k3::perplexity_windows(10, 1, 1), k3::UsageError);
  CHECK_THROWS_AS(k3::perplexity_windows(10, 4, 4), k3::UsageError);
  CHECK_THROWS_AS(k3::perplexity_windows(10, 4, 0), k3::UsageError);
  CHECK_THROWS_WITH(k3::perplexity_windows(10, 4, 5), Catch::Contains("between 1 and the window minus one (3)"));
  // The settings: stride 0 is half the window; a negative stride or chunk is refused.
  CHECK(k3::checked_stride(windows_of(9, 0, 4)) == 4);
  CHECK(k3::checked_stride(windows_of(9, 3, 4)) == 3);
  CHECK_THROWS_WITH(k3::checked_stride(windows_of(9, -1, 4)), Catch::Contains("0 (half the window) or more"));
  CHECK_THROWS_WITH(k3::checked_stride(windows_of(9, 3, 0)), Catch::Contains("chunk must be at least 1"));
  CHECK_THROWS_AS(k3::checked_stride(windows_of(9, 9, 4)), k3::UsageError);
}

TEST_CASE("a token's score is minus the log-softmax of its logit, in fp64", "[perplexity]") {
  const std::vector<float> uniform(4, 0.5f);
  CHECK(k3::token_nll(uniform, 2) == Approx(std::log(4.0)).epsilon(1e-12));
  const std::vector<float> l{1.0f, 2.0f, 3.0f};
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  CHECK(k3::token_nll(l, 0) == Approx(lse - 1.0).epsilon(1e-12));
  CHECK(k3::token_nll(l, 2) == Approx(lse - 3.0).epsilon(1e-12));
  // Large logits do not overflow: the maximum is taken out first.
  const std::vector<float> big{1000.0f, 1000.0f};
  CHECK(k3::token_nll(big, 1) == Approx(std::log(2.0)).epsilon(1e-12));
}

TEST_CASE("one window scores what one whole-sequence feed predicts", "[perplexity]") {
  k3::PluginHost host;
  k3::Model m(test_model("tiny"), host, resident("scalar", 1));
  const auto ids = some_ids(m.config(), 20);
  std::vector<float> logits;
  k3::Session s(m, 32);
  s.feed(ids, true, logits);
  const auto vocab = static_cast<std::size_t>(m.config().vocab_size);
  double sum = 0;
  for (std::size_t p = 1; p < ids.size(); ++p) sum += k3::token_nll({logits.data() + (p - 1) * vocab, vocab}, ids[p]);

  const auto r = k3::perplexity(m, ids, windows_of(32, 16, 7));
  CHECK(r.ids == 20);
  CHECK(r.scored == 19);
  CHECK(r.windows == 1);
  CHECK_FALSE(r.interrupted);
  CHECK(same_bits(r.nll_sum, sum));
  CHECK(r.perplexity() == Approx(std::exp(sum / 19)).epsilon(1e-12));
}

TEST_CASE("sliding windows score every id once, each with the context its window gives", "[perplexity]") {
  k3::PluginHost host;
  k3::Model m(test_model("tiny"), host, resident("scalar", 1));
  const auto ids = some_ids(m.config(), 30);
  const auto r = k3::perplexity(m, ids, windows_of(12, 5, 4));
  CHECK(r.scored == 29);
  CHECK(r.windows == static_cast<std::int64_t>(k3::perplexity_windows(30, 12, 5).size()));
  // The second window's ids are scored with less context than one long window gives them,
  // so the totals differ; the first window's part is the same in both.
  const auto whole = k3::perplexity(m, ids, windows_of(64, 32, 4));
  CHECK(whole.scored == 29);
  CHECK_FALSE(same_bits(r.nll_sum, whole.nll_sum));
  // The same sum, window by window, each window fed whole from a fresh session.
  const auto vocab = static_cast<std::size_t>(m.config().vocab_size);
  double sum = 0;
  std::vector<float> logits;
  for (const auto& w : k3::perplexity_windows(30, 12, 5)) {
    k3::Session s(m, 12);
    s.feed(std::span(ids).subspan(static_cast<std::size_t>(w.start), static_cast<std::size_t>(w.end - w.start)), true,
           logits);
    for (auto t = w.first_scored; t < w.end; ++t)
      sum += k3::token_nll({logits.data() + static_cast<std::size_t>(t - 1 - w.start) * vocab, vocab},
                           ids[static_cast<std::size_t>(t)]);
  }
  CHECK(same_bits(r.nll_sum, sum));
}

TEST_CASE("perplexity bits are the same for every kernel set, thread count, chunk and a streamed budget",
          "[perplexity][identity]") {
  k3::PluginHost host;
  const auto ids = some_ids(k3::load_geometry("tiny").config, 40);
  k3::Model scalar(test_model("tiny"), host, resident("scalar", 1));
  const auto ref = k3::perplexity(scalar, ids, windows_of(16, 8, 5));
  REQUIRE(ref.scored == 39);
  REQUIRE(std::isfinite(ref.nll_sum));
  CHECK(same_bits(k3::perplexity(scalar, ids, windows_of(16, 8, 1)).nll_sum, ref.nll_sum));
  CHECK(same_bits(k3::perplexity(scalar, ids, windows_of(16, 8, 16)).nll_sum, ref.nll_sum));
  k3::Model two(test_model("tiny"), host, resident("scalar", 2));
  CHECK(same_bits(k3::perplexity(two, ids, windows_of(16, 8, 5)).nll_sum, ref.nll_sum));
  for (const auto& p : host.plugins()) {
    if (p.kind != k3::PluginKind::kernels || p.name == "scalar" || p.score <= 0) continue;
    INFO("kernel set " << p.name);
    k3::Model m(test_model("tiny"), host, resident(p.name, 2));
    CHECK(same_bits(k3::perplexity(m, ids, windows_of(16, 8, 5)).nll_sum, ref.nll_sum));
  }
  k3::Model small(test_model("tiny"), host, streamed());
  REQUIRE(small.streaming());
  CHECK(same_bits(k3::perplexity(small, ids, windows_of(16, 8, 5)).nll_sum, ref.nll_sum));
}

TEST_CASE("a stop request ends scoring after the current chunk, keeping what was scored", "[perplexity][stop]") {
  k3::PluginHost host;
  k3::Model m(test_model("tiny"), host, resident("scalar", 1));
  const auto ids = some_ids(m.config(), 30);
  std::atomic<bool> stop{false};
  auto s = windows_of(12, 6, 4);
  s.stop = &stop;
  std::int64_t calls = 0;
  s.on_progress = [&](std::int64_t scored, std::int64_t total) {
    CHECK(total == 29);
    if (++calls == 2) stop = true;  // after the second chunk: its rows predict ids 1..8
    (void)scored;
  };
  const auto r = k3::perplexity(m, ids, s);
  CHECK(r.interrupted);
  CHECK(r.scored == 8);
  CHECK(r.windows == 1);
  CHECK(std::isfinite(r.perplexity()));
}

TEST_CASE("ids outside the vocabulary and texts too short to score are refused before any compute",
          "[perplexity][errors]") {
  k3::PluginHost host;
  k3::Model m(test_model("tiny"), host, resident("scalar", 1));
  auto ids = some_ids(m.config(), 5);
  ids[3] = static_cast<std::uint32_t>(m.config().vocab_size);
  CHECK_THROWS_WITH(k3::perplexity(m, ids, windows_of(8, 4, 4)),
                    Catch::Contains("position 3 is outside the vocabulary"));
  const std::vector<std::uint32_t> one{1};
  CHECK_THROWS_AS(k3::perplexity(m, one, windows_of(8, 4, 4)), k3::UsageError);
  CHECK_THROWS_AS(k3::perplexity(m, some_ids(m.config(), 5), windows_of(8, 4, 0)), k3::UsageError);
}
