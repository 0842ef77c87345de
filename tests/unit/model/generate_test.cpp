// Generation: incremental and full-recompute decoding emit the same ids; a run saved and
// resumed emits exactly what an uninterrupted one does; EOS stops the run.
#include <catch2/catch.hpp>

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
  // The last generated token has not been fed yet: it is the prompt of the resumed run.
  const auto file = k3::test::scratch_dir() / "resume.k3state";
  first.save(file);
  k3::Session second(m, 64);
  second.load(file);
  g.prompt = {part1.back()};
  const auto part2 = k3::generate(second, g).generated;
  CHECK(part2 == std::vector<std::uint32_t>(full.begin() + 4, full.end()));
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
