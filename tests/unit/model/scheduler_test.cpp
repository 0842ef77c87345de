// The step scheduler (k3/scheduler.hpp): sequences generating together emit, each, the ids
// generate() emits for it alone, and leave their sessions in the same state, whatever
// shares their steps (other prompts, lengths, sampling settings, drafts on and off, later
// arrivals, prompts prefilled beside decoding sequences), across kernel sets, thread counts
// and streamed budgets; one that stops or fails leaves at once and the others go on.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <vector>

#include <k3/error.hpp>
#include <k3/generate.hpp>
#include <k3/geometry.hpp>
#include <k3/model.hpp>
#include <k3/plan.hpp>
#include <k3/scheduler.hpp>

#include "test_models.hpp"

namespace {

k3::test::ScratchCleanup cleanup;

constexpr std::int64_t kContext = 128;

/// The trained model: its text repeats, so drafts are both kept and refused.
std::string fortune() { return (std::filesystem::path(K3_SOURCE_DIR) / "data/models/fortune").string(); }

k3::ModelSettings resident(const std::string& kernels, int threads) {
  k3::ModelSettings s;
  s.kernels = kernels;
  s.threads = threads;
  s.min_parallel_work = 0;  // every product and per-sequence item split over the threads
  s.memory.trunk_gb = 1000;
  s.memory.expert_cache_gb = 1000;
  s.memory.context = kContext;
  return s;
}

/// A third of the trunk pinned, 6 expert slots.
k3::ModelSettings streamed(const std::string& kernels, int threads) {
  k3::ModelSettings s = resident(kernels, threads);
  k3::PlanInputs probe = s.memory;
  probe.available = 1ull << 40;
  const auto full = k3::plan_memory(k3::load_geometry("fortune").config, probe);
  const std::uint64_t trunk = std::accumulate(full.layer_bytes.begin(), full.layer_bytes.end(), std::uint64_t{0});
  s.memory.trunk_gb = static_cast<double>(trunk) / 3 / 1e9;
  s.memory.expert_cache_gb = static_cast<double>(6 * full.expert_slot_bytes) / 1e9;
  return s;
}

/// Four requests that differ in everything a request sets.
std::vector<k3::GenerateSettings> requests() {
  std::vector<k3::GenerateSettings> out(4);
  // BOS and a phrase the model goes on to repeat: drafts kept and refused.
  out[0].prompt = {3072, 258, 641, 575, 290, 9, 9, 291, 301, 258, 444, 455, 301, 258, 444, 455};
  out[0].max_new_tokens = 14;
  out[0].speculative.max_draft = 4;
  out[1].prompt = {3072, 301, 258, 444};
  out[1].max_new_tokens = 10;
  out[1].sampling.temperature = 0.9;
  out[1].sampling.top_k = 40;
  out[1].sampling.seed = 5;
  out[1].speculative.max_draft = 3;
  // A longer prompt: prefilled in several steps beside the decoding ones.
  for (std::uint32_t i = 0; i < 30; ++i) out[2].prompt.push_back(200 + (i * 37) % 300);
  out[2].max_new_tokens = 8;
  out[3].prompt = {3072, 575, 290};
  out[3].max_new_tokens = 6;
  out[3].sampling.temperature = 1.0;
  out[3].sampling.seed = 9;
  out[3].sampling.repeat_penalty = 1.3;
  out[3].speculative.max_draft = 2;
  out[3].speculative.adaptive = false;
  for (auto& g : out) {
    g.stop_at_eos = false;
    g.prefill_chunk = 8;
  }
  return out;
}

struct Outcome {
  k3::GenerateResult result;
  std::vector<std::uint32_t> tokens, pending;
  std::vector<float> next;  ///< the logits of feeding its pending id afterwards: the state carries on
};

Outcome outcome_of(k3::Session& s, k3::GenerateResult r) {
  Outcome o{std::move(r), s.tokens(), s.pending(), {}};
  s.feed(o.pending, false, o.next);
  return o;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// Each request generated alone.
std::vector<Outcome> alone(k3::Model& m, const std::vector<k3::GenerateSettings>& gs) {
  std::vector<Outcome> out;
  for (const auto& g : gs) {
    k3::Session s(m, kContext);
    out.push_back(outcome_of(s, k3::generate(s, g)));
  }
  return out;
}

/// What the steps held (to show that they really were shared).
struct Shared {
  std::size_t steps = 0, batched = 0, mixed = 0;  ///< all, with 2+ sequences, with prefill beside decode
};

/// The requests through one scheduler of `parallel` slots, with a small prefill budget: the
/// first two join at once, the others as soon as a slot is free, a step later.
std::vector<Outcome> together(k3::Model& m, const std::vector<k3::GenerateSettings>& gs, std::size_t parallel,
                              Shared& shared) {
  std::vector<std::unique_ptr<k3::Session>> sessions;
  std::vector<std::unique_ptr<k3::Sequence>> seqs;
  for (const auto& g : gs) {
    sessions.push_back(std::make_unique<k3::Session>(m, kContext));
    seqs.push_back(std::make_unique<k3::Sequence>(*sessions.back(), g));
  }
  k3::StepScheduler scheduler(m, {parallel, 5, kContext, 4});
  std::size_t next = 0;
  for (; next < 2; ++next) scheduler.add(*seqs[next]);
  std::size_t waited = 0;
  while (scheduler.active() != 0 || next < seqs.size()) {
    if (next < seqs.size() && scheduler.active() < parallel && (++waited > 1 || scheduler.active() == 0)) {
      scheduler.add(*seqs[next++]);
      waited = 0;
    }
    REQUIRE(scheduler.step());
    const k3::StepStats& st = scheduler.last();
    ++shared.steps;
    shared.batched += st.sequences > 1 ? 1 : 0;
    shared.mixed += st.decoding > 0 && st.decoding < st.sequences ? 1 : 0;
    CHECK(st.rows <= k3::step_rows(scheduler.settings()));
  }
  std::vector<Outcome> out;
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    REQUIRE(seqs[i]->done());
    REQUIRE(!seqs[i]->failure());
    out.push_back(outcome_of(*sessions[i], seqs[i]->result()));
  }
  return out;
}

void check_same(const std::vector<Outcome>& got, const std::vector<Outcome>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i].result.generated == want[i].result.generated);
    CHECK(got[i].result.stop_reason == want[i].result.stop_reason);
    CHECK(got[i].tokens == want[i].tokens);
    CHECK(got[i].pending == want[i].pending);
    CHECK(same_bits(got[i].next, want[i].next));
  }
}

}  // namespace

TEST_CASE("sequences generated together emit the ids each emits alone, and leave the same state",
          "[scheduler][identity]") {
  k3::PluginHost host;
  k3::Model m(fortune(), host, resident("scalar", 1));
  const auto gs = requests();
  const std::vector<Outcome> ref = alone(m, gs);
  for (std::size_t i = 0; i < ref.size(); ++i)
    CHECK(ref[i].result.generated.size() == static_cast<std::size_t>(gs[i].max_new_tokens));
  CHECK(ref[0].result.speculative.drafts_accepted > 0);  // drafts kept, so several tokens per step
  CHECK(ref[0].result.generated != ref[1].result.generated);
  for (const std::size_t parallel : {2u, 3u, 4u}) {
    CAPTURE(parallel);
    Shared shared;
    check_same(together(m, gs, parallel, shared), ref);
    CHECK(shared.batched > shared.steps / 2);
    CHECK(shared.mixed > 0);  // a prompt was prefilled beside decoding sequences
  }
}

TEST_CASE("sequences generated together keep their ids across kernel sets, thread counts and streamed budgets",
          "[scheduler][identity][kernels][threads]") {
  k3::PluginHost host;
  const auto gs = requests();
  std::vector<Outcome> ref;
  {
    k3::Model m(fortune(), host, resident("scalar", 1));
    ref = alone(m, gs);
  }
  struct Setup {
    const char* name;
    k3::ModelSettings s;
  };
  const Setup setups[] = {{"auto, 2 threads, resident", resident("auto", 2)},
                          {"scalar, 2 threads, streamed", streamed("scalar", 2)},
                          {"auto, 1 thread, streamed", streamed("auto", 1)}};
  for (const Setup& setup : setups) {
    CAPTURE(setup.name);
    k3::Model m(fortune(), host, setup.s);
    Shared shared;
    check_same(together(m, gs, 4, shared), ref);
  }
}

TEST_CASE("a sequence that is stopped or fails leaves at once and the others go on", "[scheduler][stop]") {
  k3::PluginHost host;
  k3::Model m(fortune(), host, resident("auto", 2));
  const auto gs = requests();
  const std::vector<Outcome> ref = alone(m, gs);
  std::vector<std::unique_ptr<k3::Session>> sessions;
  for (std::size_t i = 0; i < 3; ++i) sessions.push_back(std::make_unique<k3::Session>(m, kContext));
  std::atomic<bool> stop{false};
  k3::GenerateSettings stopped = gs[0];
  stopped.stop = &stop;
  std::size_t handed = 0;
  k3::Sequence a(*sessions[0], stopped, [&](std::uint32_t) {
    if (++handed == 3) stop.store(true);
  });
  k3::Sequence b(*sessions[1], gs[1], [](std::uint32_t) { throw std::runtime_error("the client's callback failed"); });
  k3::Sequence c(*sessions[2], gs[2]);
  k3::StepScheduler scheduler(m, {3, 64, kContext, 4});
  scheduler.add(a);
  scheduler.add(b);
  scheduler.add(c);
  std::size_t steps = 0;
  bool a_left = false, b_left = false;
  while (scheduler.step()) {
    ++steps;
    for (k3::Sequence* s : scheduler.finished()) {
      a_left = a_left || s == &a;
      b_left = b_left || s == &b;
    }
    if (!c.done()) CHECK(scheduler.active() >= 1);
  }
  CHECK(a_left);
  CHECK(b_left);
  // a: ended at the token whose callback asked, its ids those of an uninterrupted run so far.
  CHECK(a.result().interrupted);
  CHECK(a.result().stop_reason == k3::StopReason::interrupted);
  CHECK(a.result().generated.size() == 3);
  CHECK(std::equal(a.result().generated.begin(), a.result().generated.end(), ref[0].result.generated.begin()));
  // b: failed with its callback's error at its first token.
  REQUIRE(b.failure());
  CHECK_THROWS_WITH(std::rethrow_exception(b.failure()), "the client's callback failed");
  CHECK(b.result().generated.size() == 1);
  // c: as alone.
  CHECK(c.result().generated == ref[2].result.generated);
  CHECK(steps > 3);
  // A full scheduler refuses one more, and a finished sequence cannot join again.
  k3::StepScheduler one(m, {1, 8, kContext, 0});
  k3::Session s1(m, kContext), s2(m, kContext);
  k3::Sequence x(s1, gs[3]), y(s2, gs[3]);
  one.add(x);
  CHECK_THROWS_AS(one.add(y), k3::RuntimeError);
  CHECK_THROWS_AS(scheduler.add(a), k3::RuntimeError);
}
