// Generation: incremental and full-recompute decoding emit the same ids; a run saved and
// resumed (after its token limit, a stop request at a token or between prefill chunks)
// emits exactly what an uninterrupted one does; EOS and the end of the context stop the run;
// the repeat penalty picks what an independent loop picks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <span>

#include <k3/generate.hpp>
#include <k3/model.hpp>

#include "test_models.hpp"

namespace {

k3::test::ScratchCleanup cleanup;

k3::ModelSettings scalar() {
  k3::ModelSettings s;
  s.kernels = "scalar";
  s.threads = 1;
  return s;
}

}  // namespace

TEST_CASE("incremental, chunked and recompute decoding emit the same ids", "[generate]") {
  k3::PluginHost host;
  k3::Model m(k3::test::test_model("tiny"), host, scalar());
  k3::GenerateSettings g;
  g.prompt = {5, 17, 42, 3, 99, 7, 64, 12};
  g.max_new_tokens = 10;
  g.stop_at_eos = false;
  g.prefill_chunk = 1;
  k3::Session a(m, 64);
  const auto inc = k3::generate(a, g).generated;
  REQUIRE(inc.size() == 10);
  g.prefill_chunk = 3;
  k3::Session b(m, 64);
  CHECK(k3::generate(b, g).generated == inc);
  g.mode = k3::DecodeMode::recompute;
  k3::Session c(m, 64);
  CHECK(k3::generate(c, g).generated == inc);
}

TEST_CASE("a saved and resumed run emits what an uninterrupted run emits", "[generate][state]") {
  k3::PluginHost host;
  k3::Model m(k3::test::test_model("tiny"), host, scalar());
  k3::GenerateSettings g;
  g.prompt = {1, 2, 3, 4, 5, 6};
  g.max_new_tokens = 8;
  g.stop_at_eos = false;
  g.sampling.temperature = 0.8;
  g.sampling.seed = 9;
  k3::Session whole(m, 64);
  const auto full = k3::generate(whole, g).generated;

  // First run: the prompt and 4 tokens, then save.
  k3::Session first(m, 64);
  g.max_new_tokens = 4;
  const auto part1 = k3::generate(first, g).generated;
  REQUIRE(part1 == std::vector<std::uint32_t>(full.begin(), full.begin() + 4));
  // The last generated token has not been fed yet: the session holds it, and so does the
  // state file, so the resumed run needs no prompt.
  CHECK(first.pending() == std::vector<std::uint32_t>{part1.back()});
  CHECK(first.position() == static_cast<std::int64_t>(6 + 3));
  const auto file = k3::test::scratch_dir() / "resume.k3state";
  first.save(file);
  k3::Session second(m, 64);
  second.load(file);
  CHECK(second.pending() == first.pending());
  g.prompt = {};
  const auto r2 = k3::generate(second, g);
  CHECK(r2.pending == std::vector<std::uint32_t>{part1.back()});
  CHECK(r2.generated == std::vector<std::uint32_t>(full.begin() + 4, full.end()));
}

namespace {

/// Sets a stop flag from inside the forward pass: at the first routed-expert request, so
/// the prefill stops after its first chunk.
struct StopAtFirstRoute final : k3::RoutingListener {
  std::atomic<bool>* flag = nullptr;
  void on_route(std::int64_t, std::size_t, std::span<const std::uint32_t>) override { flag->store(true); }
};

}  // namespace

TEST_CASE("a run stopped at a token and resumed emits what an uninterrupted run emits", "[generate][state][stop]") {
  k3::PluginHost host;
  k3::Model m(k3::test::test_model("tiny"), host, scalar());
  for (const double temperature : {0.0, 0.9}) {
    DYNAMIC_SECTION("temperature " << temperature) {
      k3::GenerateSettings g;
      g.prompt = {8, 6, 4, 2, 9, 7};
      g.max_new_tokens = 9;
      g.stop_at_eos = false;
      g.sampling.temperature = temperature;
      g.sampling.seed = 21;
      k3::Session whole(m, 64);
      const auto full = k3::generate(whole, g).generated;
      REQUIRE(full.size() == 9);

      // Stop requested while the third token is printed: generation ends right after it.
      std::atomic<bool> stop{false};
      g.stop = &stop;
      k3::Session first(m, 64);
      std::size_t seen = 0;
      const auto r1 = k3::generate(first, g, [&](std::uint32_t) {
        if (++seen == 3) stop.store(true);
      });
      CHECK(r1.interrupted);
      CHECK_FALSE(r1.stopped_at_eos);
      REQUIRE(r1.generated == std::vector<std::uint32_t>(full.begin(), full.begin() + 3));
      CHECK(first.pending() == std::vector<std::uint32_t>{r1.generated.back()});
      const auto file = k3::test::scratch_dir() / "stopped.k3state";
      first.save(file);

      k3::Session second(m, 64);
      second.load(file);
      g.stop = nullptr;
      g.prompt = {};
      g.max_new_tokens = 6;
      const auto r2 = k3::generate(second, g);
      CHECK_FALSE(r2.interrupted);
      CHECK(r2.generated == std::vector<std::uint32_t>(full.begin() + 3, full.end()));
    }
  }
}

TEST_CASE("a prefill stopped between chunks keeps the rest of the prompt pending", "[generate][state][stop]") {
  k3::PluginHost host;
  k3::Model m(k3::test::test_model("tiny"), host, scalar());
  k3::GenerateSettings g;
  g.prompt = {11, 22, 33, 44, 55, 66, 77};
  g.prefill_chunk = 3;
  g.max_new_tokens = 5;
  g.stop_at_eos = false;
  g.sampling.temperature = 0.7;
  g.sampling.seed = 4;
  k3::Session whole(m, 64);
  const auto full = k3::generate(whole, g).generated;

  std::atomic<bool> stop{false};
  StopAtFirstRoute listener;
  listener.flag = &stop;
  g.stop = &stop;
  k3::Session first(m, 64);
  first.set_routing_listener(&listener);
  const auto r1 = k3::generate(first, g);
  first.set_routing_listener(nullptr);
  CHECK(r1.interrupted);
  CHECK(r1.generated.empty());
  CHECK(first.position() == 3);  // one chunk fed
  CHECK(first.pending() == std::vector<std::uint32_t>(g.prompt.begin() + 3, g.prompt.end()));
  const auto file = k3::test::scratch_dir() / "prefill.k3state";
  first.save(file);

  k3::Session second(m, 64);
  second.load(file);
  g.stop = nullptr;
  g.prompt = {};
  CHECK(k3::generate(second, g).generated == full);
}

TEST_CASE("a conversation with nothing left to feed and no prompt is refused", "[generate][state]") {
  k3::PluginHost host;
  k3::Model m(k3::test::test_model("tiny"), host, scalar());
  k3::GenerateSettings g;
  g.prompt = {3, 1, 4};
  g.max_new_tokens = 0;  // prefill only: every id fed, nothing pending
  k3::Session s(m, 64);
  (void)k3::generate(s, g);
  CHECK(s.pending().empty());
  g.prompt = {};
  CHECK_THROWS_WITH(k3::generate(s, g), Catch::Contains("give a prompt"));
  k3::Session fresh(m, 64);
  CHECK_THROWS_WITH(k3::generate(fresh, g), Catch::Contains("no state was loaded"));
}

TEST_CASE("generation stops at the end-of-sequence id", "[generate]") {
  k3::PluginHost host;
  k3::Model m(k3::test::test_model("tiny"), host, scalar());
  k3::GenerateSettings g;
  g.prompt = {10, 11, 12};
  g.max_new_tokens = 6;
  g.stop_at_eos = false;
  k3::Session s(m, 64);
  const auto ids = k3::generate(s, g).generated;
  // Declare the third generated id to be EOS: the run must stop right after emitting it.
  g.eos_token = ids[2];
  g.stop_at_eos = true;
  k3::Session t(m, 64);
  const auto r = k3::generate(t, g);
  CHECK(r.stopped_at_eos);
  const auto first_eos = std::find(ids.begin(), ids.end(), ids[2]) - ids.begin();
  CHECK(r.generated == std::vector<std::uint32_t>(ids.begin(), ids.begin() + first_eos + 1));
}

TEST_CASE("generation stops at the end of the context, and a prompt that does not fit is refused", "[generate]") {
  k3::PluginHost host;
  k3::Model m(k3::test::test_model("tiny"), host, scalar());
  k3::GenerateSettings g;
  g.prompt = {10, 11, 12, 13, 14};
  g.max_new_tokens = 40;
  g.stop_at_eos = false;
  k3::Session roomy(m, 64);
  const auto all = k3::generate(roomy, g);
  REQUIRE(all.generated.size() == 40);
  CHECK(all.stop_reason == k3::StopReason::length);
  for (const auto mode : {k3::DecodeMode::incremental, k3::DecodeMode::recompute}) {
    CAPTURE(mode == k3::DecodeMode::recompute);
    g.mode = mode;
    // 16 positions: the prompt's 5 and 10 generated ones are fed, the 11th is the last,
    // whose successor would need a 17th; the ids are those of the roomy run.
    k3::Session tight(m, 16);
    const auto r = k3::generate(tight, g);
    CHECK(r.stop_reason == k3::StopReason::context_full);
    CHECK_FALSE(r.interrupted);
    CHECK(r.generated == std::vector<std::uint32_t>(all.generated.begin(), all.generated.begin() + 12));
    CHECK(tight.position() == 16);
    CHECK(tight.pending() == std::vector<std::uint32_t>{r.generated.back()});
    // The token limit and the context end together: the limit is what is reported.
    g.max_new_tokens = 12;
    k3::Session both(m, 16);
    CHECK(k3::generate(both, g).stop_reason == k3::StopReason::length);
    g.max_new_tokens = 40;
  }
  g.mode = k3::DecodeMode::incremental;
  // A prompt exactly as long as the context still gives its one token.
  k3::Session exact(m, 5);
  const auto one = k3::generate(exact, g);
  CHECK(one.generated == std::vector<std::uint32_t>{all.generated.front()});
  CHECK(one.stop_reason == k3::StopReason::context_full);
  // One more does not fit: refused before anything is fed.
  k3::Session small(m, 4);
  CHECK_THROWS_WITH(k3::generate(small, g), Catch::Contains("the prompt does not fit the context: 5 tokens exceed "
                                                            "memory.context 4"));
  CHECK(small.position() == 0);
}

TEST_CASE("the repeat penalty gives the ids of an independent greedy loop", "[generate]") {
  k3::PluginHost host;
  k3::Model m(k3::test::test_model("tiny"), host, scalar());
  const std::vector<std::uint32_t> prompt = {7, 8, 9, 7, 8, 9, 7, 8, 9, 7, 8};
  constexpr float kPenalty = 3.0f;
  constexpr std::size_t kWindow = 6;
  constexpr std::int64_t kTokens = 24;
  // Independently: feed, penalise the distinct ids among the last 6 of the context by hand
  // (divide a positive logit, multiply a negative one), take the first maximum, feed it.
  std::vector<std::uint32_t> expected;
  {
    k3::Session s(m, 64);
    std::vector<float> logits;
    s.feed(prompt, false, logits);
    std::vector<std::uint32_t> context = prompt;
    for (std::int64_t n = 0; n < kTokens; ++n) {
      std::vector<float> row = logits;
      std::vector<bool> done(row.size(), false);
      for (std::size_t i = context.size() - std::min(kWindow, context.size()); i < context.size(); ++i) {
        const std::uint32_t id = context[i];
        if (done[id]) continue;
        done[id] = true;
        row[id] = row[id] <= 0.0f ? row[id] * kPenalty : row[id] / kPenalty;
      }
      const auto best = static_cast<std::uint32_t>(std::max_element(row.begin(), row.end()) - row.begin());
      expected.push_back(best);
      context.push_back(best);
      if (n + 1 < kTokens) s.feed({&best, 1}, false, logits);
    }
  }
  k3::GenerateSettings g;
  g.prompt = prompt;
  g.max_new_tokens = kTokens;
  g.stop_at_eos = false;
  k3::Session plain_session(m, 64);
  const auto unpenalized = k3::generate(plain_session, g).generated;
  CHECK(unpenalized != expected);  // the penalty changes this run: the check below means something
  g.sampling.repeat_penalty = kPenalty;
  g.sampling.repeat_last_n = kWindow;
  for (const auto mode : {k3::DecodeMode::incremental, k3::DecodeMode::recompute}) {
    CAPTURE(mode == k3::DecodeMode::recompute);
    g.mode = mode;
    k3::Session s(m, 64);
    CHECK(k3::generate(s, g).generated == expected);
  }
  // A penalty of 1 is the plain run, bit for bit.
  g.sampling.repeat_penalty = 1.0;
  k3::Session one(m, 64);
  CHECK(k3::generate(one, g).generated == unpenalized);
}
