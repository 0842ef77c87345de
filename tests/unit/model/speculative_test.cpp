// Exact speculative decoding: a tentative chunk keeps exactly the state of the tokens it
// keeps (KDA replayed, MLA cut back); speculative generation emits the ids of plain
// generation, greedy and sampled, across kernel sets, thread counts and streamed budgets,
// and ends (EOS, stop request, a throwing callback) where a sequential run ends.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <vector>

#include <k3/draft.hpp>
#include <k3/draft_model.hpp>
#include <k3/error.hpp>
#include <k3/generate.hpp>
#include <k3/geometry.hpp>
#include <k3/model.hpp>
#include <k3/plan.hpp>

#include "test_models.hpp"

namespace {

k3::test::ScratchCleanup cleanup;

/// The trained demo model: real text repeats itself, so drafts are both kept and refused.
std::string fortune() { return (std::filesystem::path(K3_SOURCE_DIR) / "data/models/fortune").string(); }

k3::ModelSettings settings(const std::string& kernels, int threads) {
  k3::ModelSettings s;
  s.kernels = kernels;
  s.threads = threads;
  s.memory.trunk_gb = 1000;
  s.memory.expert_cache_gb = 1000;
  s.memory.context = 256;
  return s;
}

/// A budget that streams the fortune model: a third of the trunk pinned, 6 expert slots.
k3::ModelSettings streamed(const std::string& kernels, int threads) {
  k3::ModelSettings s = settings(kernels, threads);
  k3::PlanInputs probe = s.memory;
  probe.available = 1ull << 40;
  const auto full = k3::plan_memory(k3::load_geometry("fortune").config, probe);
  const std::uint64_t trunk = std::accumulate(full.layer_bytes.begin(), full.layer_bytes.end(), std::uint64_t{0});
  s.memory.trunk_gb = static_cast<double>(trunk) / 3 / 1e9;
  s.memory.expert_cache_gb = static_cast<double>(6 * full.expert_slot_bytes) / 1e9;
  return s;
}

std::vector<float> next_logits(k3::Session& s, std::uint32_t id) {
  std::vector<float> logits;
  s.feed({&id, 1}, false, logits);
  return logits;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// BOS, a start, and a phrase the model goes on to repeat (its greedy continuation from the start).
const std::vector<std::uint32_t> kPrompt = {3072, 258, 641, 575, 290, 9,   9,   291,
                                            301,  258, 444, 455, 301, 258, 444, 455};

k3::GenerateSettings plain_settings(std::int64_t tokens) {
  k3::GenerateSettings g;
  g.prompt = kPrompt;
  g.max_new_tokens = tokens;
  g.stop_at_eos = false;
  g.prefill_chunk = 4;
  return g;
}

}  // namespace

TEST_CASE("a tentative chunk keeping m of its n tokens leaves the state of feeding those m",
          "[speculative][identity]") {
  k3::PluginHost host;
  for (const char* geometry : {"tiny", "tiny2"}) {  // KDA and MLA layers in both orders
    k3::Model m(k3::test::test_model(geometry), host, settings("scalar", 1));
    const std::vector<std::uint32_t> prompt = {5, 17, 42, 3, 99};
    const std::vector<std::uint32_t> batch = {7, 64, 12, 7, 64};
    std::vector<float> logits;
    // What feeding the whole batch shows at every position.
    k3::Session whole(m, 64);
    whole.feed(prompt, false, logits);
    std::vector<float> all;
    whole.feed(batch, true, all);
    for (std::size_t keep = 0; keep <= batch.size(); ++keep) {
      CAPTURE(geometry, keep);
      k3::Session tentative(m, 64);
      tentative.feed(prompt, false, logits);
      std::vector<float> rows;
      const std::size_t kept = tentative.feed_tentative(batch, rows, [&](std::span<const float>) { return keep; });
      CHECK(kept == keep);
      CHECK(same_bits(rows, all));  // the logits of a tentative chunk are those of feeding it
      k3::Session sequential(m, 64);
      sequential.feed(prompt, false, logits);
      for (std::size_t i = 0; i < keep; ++i) sequential.feed({&batch[i], 1}, false, logits);
      CHECK(tentative.tokens() == sequential.tokens());
      CHECK(tentative.position() == sequential.position());
      // The carried state: the next tokens give the same bits.
      CHECK(same_bits(next_logits(tentative, 250), next_logits(sequential, 250)));
      CHECK(same_bits(next_logits(tentative, 11), next_logits(sequential, 11)));
    }
  }
}

TEST_CASE("a tentative chunk whose check throws keeps nothing", "[speculative][errors]") {
  k3::PluginHost host;
  k3::Model m(k3::test::test_model("tiny"), host, settings("scalar", 1));
  std::vector<float> logits;
  k3::Session a(m, 64), b(m, 64);
  a.feed(std::vector<std::uint32_t>{1, 2, 3}, false, logits);
  b.feed(std::vector<std::uint32_t>{1, 2, 3}, false, logits);
  const std::vector<std::uint32_t> batch = {4, 5, 6};
  CHECK_THROWS_AS(a.feed_tentative(batch, logits,
                                   [](std::span<const float>) -> std::size_t {
                                     throw std::runtime_error("check failed");
                                   }),
                  std::runtime_error);
  CHECK_THROWS(a.feed_tentative(batch, logits, [](std::span<const float>) { return std::size_t{4}; }));
  CHECK(a.tokens() == b.tokens());
  CHECK(same_bits(next_logits(a, 9), next_logits(b, 9)));
}

TEST_CASE("prompt lookup drafts what followed the latest earlier occurrence of the longest suffix", "[speculative]") {
  using V = std::vector<std::uint32_t>;
  // Suffix (2,3) occurs at 1 and 5; no earlier (1,2,3)... (1,2,3) occurs at 0: it wins.
  CHECK(k3::lookup_drafts(V{1, 2, 3, 9, 8, 2, 3, 7, 1, 2, 3}, 3, 1, 4) == V{9, 8, 2, 3});
  // Only (3) occurs earlier: latest occurrence at index 6 -> 7, then 5.
  CHECK(k3::lookup_drafts(V{4, 3, 1, 2, 0, 0, 3, 7, 5, 3}, 3, 1, 2) == V{7, 5});
  // Limited by max_draft and by the end of the context.
  CHECK(k3::lookup_drafts(V{1, 2, 1}, 3, 1, 8) == V{2, 1});
  CHECK(k3::lookup_drafts(V{1, 2, 1}, 3, 1, 1) == V{2});
  CHECK(k3::lookup_drafts(V{1, 2, 3}, 3, 1, 4).empty());
  CHECK(k3::lookup_drafts(V{1, 2, 1}, 3, 1, 0).empty());
  // With two tokens at least, a one-token match no longer counts.
  CHECK(k3::lookup_drafts(V{4, 3, 1, 2, 0, 0, 3, 7, 5, 3}, 3, 2, 2).empty());
}

TEST_CASE("speculative decoding emits the ids of plain decoding, greedy and sampled", "[speculative][identity]") {
  k3::PluginHost host;
  struct Setup {
    const char* name;
    k3::ModelSettings s;
  };
  // Each of kernel set, thread count and budget takes both values across the three.
  const Setup setups[] = {{"scalar, 1 thread, resident", settings("scalar", 1)},
                          {"auto, 2 threads, resident", settings("auto", 2)},
                          {"scalar, 2 threads, streamed", streamed("scalar", 2)}};
  std::vector<std::uint32_t> reference_greedy, reference_sampled;
  for (const Setup& setup : setups) {
    k3::Model m(fortune(), host, setup.s);
    for (const double temperature : {0.0, 0.9}) {
      k3::GenerateSettings g = plain_settings(32);
      g.sampling.temperature = temperature;
      g.sampling.top_k = 40;
      g.sampling.seed = 7;
      k3::Session plain_session(m, 256);
      const k3::GenerateResult plain = k3::generate(plain_session, g);
      REQUIRE(plain.generated.size() == 32);
      CHECK(plain.speculative.verify_passes == 0);
      auto& reference = temperature == 0 ? reference_greedy : reference_sampled;
      if (reference.empty()) reference = plain.generated;
      CHECK(plain.generated == reference);  // the same ids in every setup
      const std::vector<std::uint32_t> plain_tokens = plain_session.tokens();
      const std::vector<std::uint32_t> plain_pending = plain_session.pending();
      const std::vector<float> plain_next = next_logits(plain_session, plain.generated.back());
      for (const std::int64_t draft : {2, 8}) {
        CAPTURE(setup.name, temperature, draft);
        g.speculative.max_draft = draft;
        k3::Session session(m, 256);
        const k3::GenerateResult spec = k3::generate(session, g);
        CHECK(spec.generated == plain.generated);
        CHECK(session.tokens() == plain_tokens);
        CHECK(session.pending() == plain_pending);
        CHECK(spec.speculative.verify_passes > 0);
        CHECK(spec.speculative.drafts_accepted <= spec.speculative.drafts_proposed);
        if (temperature == 0) {
          // The trained model repeats itself: some drafts are kept, others refused.
          CHECK(spec.speculative.drafts_accepted > 0);
          CHECK(spec.speculative.drafts_accepted < spec.speculative.drafts_proposed);
          CHECK(spec.speculative.passes() < 31);
        }
        // Every token but the last is fed back exactly once.
        CHECK(k3::decode_timing(spec).forwards == 31);
        // The state carries on as the plain one does.
        CHECK(same_bits(next_logits(session, spec.generated.back()), plain_next));
      }
    }
  }
}

TEST_CASE("speculative decoding stops at the end of the context where plain decoding stops", "[speculative][stop]") {
  k3::PluginHost host;
  k3::Model m(fortune(), host, settings("auto", 2));
  k3::GenerateSettings g = plain_settings(64);
  const std::int64_t context = static_cast<std::int64_t>(kPrompt.size()) + 20;
  k3::Session plain_session(m, context);
  const k3::GenerateResult plain = k3::generate(plain_session, g);
  REQUIRE(plain.stop_reason == k3::StopReason::context_full);
  REQUIRE(plain.generated.size() == 21);  // 20 fed, the 21st has no room
  for (const std::int64_t draft : {2, 8}) {
    CAPTURE(draft);
    g.speculative.max_draft = draft;
    g.speculative.adaptive = false;
    k3::Session session(m, context);
    const k3::GenerateResult spec = k3::generate(session, g);
    CHECK(spec.speculative.drafts_accepted > 0);
    CHECK(spec.stop_reason == k3::StopReason::context_full);
    CHECK(spec.generated == plain.generated);
    CHECK(session.tokens() == plain_session.tokens());
    CHECK(session.pending() == plain_session.pending());
  }
}

TEST_CASE("with the repeat penalty, speculative decoding emits the ids of plain decoding", "[speculative][identity]") {
  k3::PluginHost host;
  k3::Model m(fortune(), host, settings("auto", 2));
  for (const double temperature : {0.0, 0.9}) {
    k3::GenerateSettings g = plain_settings(40);
    g.sampling.temperature = temperature;
    g.sampling.seed = 3;
    g.sampling.repeat_penalty = 1.2;
    g.sampling.repeat_last_n = 4;  // the fortune model repeats phrases longer than that: drafts are still kept
    k3::Session plain_session(m, 256);
    const k3::GenerateResult plain = k3::generate(plain_session, g);
    k3::GenerateSettings unpenalized = g;
    unpenalized.sampling.repeat_penalty = 1.0;
    k3::Session other(m, 256);
    CHECK(k3::generate(other, unpenalized).generated != plain.generated);  // the penalty is in effect
    for (const std::int64_t draft : {2, 8}) {
      CAPTURE(temperature, draft);
      g.speculative.max_draft = draft;
      g.speculative.adaptive = false;
      k3::Session session(m, 256);
      const k3::GenerateResult spec = k3::generate(session, g);
      CHECK(spec.generated == plain.generated);
      CHECK(spec.speculative.verify_passes > 0);
      if (temperature == 0) CHECK(spec.speculative.drafts_accepted > 0);
    }
  }
}

TEST_CASE("speculative decoding ends where a sequential run ends: EOS, a stop request, a throwing callback",
          "[speculative][stop]") {
  k3::PluginHost host;
  k3::Model m(fortune(), host, settings("auto", 2));
  k3::GenerateSettings g = plain_settings(24);
  k3::Session probe(m, 256);
  const auto ids = k3::generate(probe, g).generated;

  // Ends at first tokens, at kept drafts and at the model's own picks after a refused one.
  for (const std::size_t at : {1, 2, 3, 4, 6, 9, 13, 18, 23}) {
    CAPTURE(at);
    // EOS: the id generated at `at` ends the run.
    k3::GenerateSettings e = g;
    e.stop_at_eos = true;
    e.eos_token = ids[at];
    k3::Session plain_eos(m, 256), spec_eos(m, 256);
    const auto pe = k3::generate(plain_eos, e);
    e.speculative.max_draft = 4;
    const auto se = k3::generate(spec_eos, e);
    CHECK(se.generated == pe.generated);
    CHECK(se.stopped_at_eos == pe.stopped_at_eos);
    CHECK(spec_eos.tokens() == plain_eos.tokens());
    CHECK(spec_eos.pending() == plain_eos.pending());

    // A stop request raised while token `at` is handed out.
    std::atomic<bool> stop{false};
    k3::GenerateSettings st = g;
    st.stop = &stop;
    std::size_t seen = 0;
    auto stop_at = [&](std::uint32_t) {
      if (++seen == at + 1) stop = true;
    };
    k3::Session plain_stop(m, 256), spec_stop(m, 256);
    const auto ps = k3::generate(plain_stop, st, stop_at);
    stop = false;
    seen = 0;
    st.speculative.max_draft = 4;
    const auto ss = k3::generate(spec_stop, st, stop_at);
    CHECK(ss.interrupted);
    CHECK(ss.generated == ps.generated);
    CHECK(spec_stop.tokens() == plain_stop.tokens());
    CHECK(spec_stop.pending() == plain_stop.pending());

    // A callback that throws at token `at` (a chat's format error).
    auto throw_at = [&](std::uint32_t) {
      if (++seen == at + 1) throw std::runtime_error("format");
    };
    k3::GenerateSettings t = g;
    k3::Session plain_throw(m, 256), spec_throw(m, 256);
    seen = 0;
    CHECK_THROWS_AS(k3::generate(plain_throw, t, throw_at), std::runtime_error);
    seen = 0;
    t.speculative.max_draft = 4;
    CHECK_THROWS_AS(k3::generate(spec_throw, t, throw_at), std::runtime_error);
    CHECK(spec_throw.tokens() == plain_throw.tokens());
  }
}

TEST_CASE("a datastore drafts the most frequent continuation of the longest suffix it holds", "[speculative]") {
  using V = std::vector<std::uint32_t>;
  // (1,2,3) is followed by 4, 5, 4: 4 is drafted; (1,2,3,4) by 1 and 9 once each: no
  // successor occurs twice, so drafting stops there.
  const k3::DraftStore store(V{1, 2, 3, 4, 1, 2, 3, 5, 1, 2, 3, 4, 9, 9});
  CHECK(store.size() == 14);
  CHECK(store.draft(V{8, 1, 2, 3}, 4) == V{4});
  // (7,2,3) is absent: the shorter (2,3) decides, the same way.
  CHECK(store.draft(V{7, 2, 3}, 4) == V{4});
  CHECK(store.draft(V{5, 5}, 4).empty());  // nothing of two tokens or more is held
  CHECK(store.draft(V{3}, 4).empty());     // a single token is too short a suffix
  CHECK(store.draft(V{1, 2, 3}, 0).empty());
  // A phrase held three times is drafted on and on, across its repetitions.
  const k3::DraftStore loop(V{10, 11, 12, 13, 14, 10, 11, 12, 13, 14, 10, 11, 12, 13, 14});
  CHECK(loop.draft(V{10, 11}, 6) == V{12, 13, 14, 10, 11, 12});
  // Unsure: (20,21) is followed by 22, 23, 24, 25 once each — no draft, although a shorter
  // suffix (21) would not be more certain either.
  const k3::DraftStore mixed(V{20, 21, 22, 20, 21, 23, 20, 21, 24, 20, 21, 25});
  CHECK(mixed.draft(V{20, 21}, 4).empty());
}

TEST_CASE("with a datastore, speculative decoding still emits the ids of plain decoding", "[speculative][identity]") {
  k3::PluginHost host;
  k3::Model m(fortune(), host, streamed("auto", 2));
  k3::GenerateSettings g = plain_settings(32);
  k3::Session plain_session(m, 256);
  const auto plain = k3::generate(plain_session, g).generated;
  // A corpus made of the plain run's own continuation, shifted by one token in places, so
  // that some drafts are right and some wrong.
  std::vector<std::uint32_t> corpus;
  for (int copy = 0; copy < 3; ++copy) corpus.insert(corpus.end(), plain.begin(), plain.end());
  for (std::size_t i = 5; i < corpus.size(); i += 11) corpus[i] = (corpus[i] + 1) % 3000;
  g.speculative.max_draft = 6;
  g.speculative.min_ngram = 1;
  g.speculative.store = std::make_shared<const k3::DraftStore>(corpus);
  k3::Session session(m, 256);
  const auto spec = k3::generate(session, g);
  CHECK(spec.generated == plain);
  CHECK(session.tokens() == plain_session.tokens());
  CHECK(spec.speculative.drafts_accepted > 0);
}

namespace {

/// A draft model over `dir`, resident, as the runtime loads one.
std::shared_ptr<k3::DraftModel> draft_model(k3::PluginHost& host, const std::string& dir, const k3::Model& target,
                                            const std::string& kernels = "scalar", int threads = 1) {
  return std::make_shared<k3::DraftModel>(std::make_unique<k3::Model>(dir, host, settings(kernels, threads)),
                                          target.config(), "job.speculative.draft_model");
}

}  // namespace

TEST_CASE(
    "the model as its own draft model: every draft is kept, greedy and sampled, and the ids are plain "
    "decoding's",
    "[speculative][identity][draft_model]") {
  k3::PluginHost host;
  k3::Model m(fortune(), host, streamed("auto", 2));
  auto self = draft_model(host, fortune(), m);
  for (const double temperature : {0.0, 0.9}) {
    CAPTURE(temperature);
    k3::GenerateSettings g = plain_settings(32);
    g.sampling.temperature = temperature;
    g.sampling.top_k = 40;
    g.sampling.seed = 11;
    k3::Session plain_session(m, 256);
    const auto plain = k3::generate(plain_session, g);
    g.speculative.max_draft = 4;
    g.speculative.adaptive = false;
    g.speculative.model = self;
    k3::Session session(m, 256);
    const auto spec = k3::generate(session, g);
    CHECK(spec.generated == plain.generated);
    CHECK(session.tokens() == plain_session.tokens());
    // The same weights draw the same token at the same (seed, position): nothing is refused,
    // and each pass yields the token and its 4 drafts (the last pass fewer: 31 fed back).
    CHECK(spec.speculative.drafts_proposed > 0);
    CHECK(spec.speculative.drafts_accepted == spec.speculative.drafts_proposed);
    CHECK(spec.speculative.passes() == 7);
  }
}

TEST_CASE(
    "a draft model that writes other text still leaves the ids of plain decoding, across kernel sets, "
    "threads and budgets, and follows a new conversation",
    "[speculative][identity][draft_model]") {
  k3::PluginHost host;
  // fortune's geometry with random weights: same tokenizer, different text, so its drafts
  // are mostly refused.
  const std::string other = k3::test::test_model("fortune").string();
  struct Setup {
    const char* name;
    k3::ModelSettings s;
  };
  const Setup setups[] = {{"scalar, 1 thread, resident", settings("scalar", 1)},
                          {"auto, 2 threads, streamed", streamed("auto", 2)}};
  std::vector<std::uint32_t> reference;
  for (const Setup& setup : setups) {
    CAPTURE(setup.name);
    k3::Model m(fortune(), host, setup.s);
    auto drafter = draft_model(host, other, m, setup.s.kernels, setup.s.threads);
    k3::GenerateSettings g = plain_settings(24);
    k3::Session plain_session(m, 256);
    const auto plain = k3::generate(plain_session, g);
    if (reference.empty()) reference = plain.generated;
    CHECK(plain.generated == reference);
    g.speculative.max_draft = 3;
    g.speculative.adaptive = false;
    g.speculative.model = drafter;
    for (int conversation = 0; conversation < 2; ++conversation) {
      // The second conversation starts over in the draft model (not an extension of the first).
      k3::Session session(m, 256);
      const auto spec = k3::generate(session, g);
      CHECK(spec.generated == plain.generated);
      CHECK(session.tokens() == plain_session.tokens());
      CHECK(spec.speculative.drafts_proposed > 0);
      CHECK(spec.speculative.drafts_accepted < spec.speculative.drafts_proposed);
    }
    CHECK(drafter->forward_tokens() > 0);
  }
}

TEST_CASE("a draft model stops at the first token it gives less than draft_min_p, and keeps plain decoding's ids",
          "[speculative][identity][draft_model]") {
  k3::PluginHost host;
  k3::Model m(fortune(), host, settings("scalar", 1));
  const std::string shipped = (std::filesystem::path(K3_SOURCE_DIR) / "data/models/fortune-draft").string();
  auto drafter = draft_model(host, shipped, m);
  const k3::SamplingSettings greedy;
  const std::vector<std::uint32_t> context(kPrompt.begin(), kPrompt.begin() + 6);
  const std::vector<std::uint32_t> full = drafter->draft(context, 6, greedy);
  REQUIRE(full.size() == 6);
  // Each draft's probability, from the draft model's logits in a copy of it of our own.
  std::vector<double> p;
  {
    k3::Model copy(shipped, host, settings("scalar", 1));
    k3::Session s(copy, 64);
    std::vector<float> logits;
    s.feed(context, false, logits);
    for (const std::uint32_t t : full) {
      const float top = *std::max_element(logits.begin(), logits.end());
      double sum = 0;
      for (const float l : logits) sum += std::exp(static_cast<double>(l) - top);
      p.push_back(std::exp(static_cast<double>(logits[t]) - top) / sum);
      logits = next_logits(s, t);
    }
  }
  CAPTURE(p);
  // A threshold just above each draft's probability cuts the drafts right before it.
  for (std::size_t k = 0; k < p.size(); ++k) {
    const double min_p = std::nextafter(p[k], 1.0);
    const std::size_t expected =
        static_cast<std::size_t>(std::find_if(p.begin(), p.end(), [&](double q) { return q < min_p; }) - p.begin());
    CHECK(expected <= k);
    const std::vector<std::uint32_t> cut = drafter->draft(context, 6, greedy, min_p);
    CHECK(cut == std::vector<std::uint32_t>(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(expected)));
  }
  CHECK(drafter->draft(context, 6, greedy, 0.0) == full);

  // Through generate: fewer drafts proposed, the same ids.
  k3::GenerateSettings g = plain_settings(24);
  k3::Session plain_session(m, 256);
  const auto plain = k3::generate(plain_session, g);
  g.speculative.max_draft = 4;
  g.speculative.adaptive = false;
  g.speculative.model = drafter;
  k3::Session all_session(m, 256);
  const auto all = k3::generate(all_session, g);
  g.speculative.draft_min_p = 0.3;
  k3::Session cut_session(m, 256);
  const auto cut = k3::generate(cut_session, g);
  CHECK(all.generated == plain.generated);
  CHECK(cut.generated == plain.generated);
  CHECK(all.speculative.drafts_accepted > 0);
  CHECK(cut.speculative.drafts_proposed < all.speculative.drafts_proposed);
}

TEST_CASE("a draft model with another tokenizer is refused, naming the key", "[speculative][errors][draft_model]") {
  k3::PluginHost host;
  k3::Model m(fortune(), host, settings("scalar", 1));
  const std::string tiny = k3::test::test_model("tiny").string();
  try {
    (void)draft_model(host, tiny, m);
    FAIL("a draft model with another vocabulary was accepted");
  } catch (const k3::UsageError& e) {
    const std::string what = e.what();
    CHECK(what.find("job.speculative.draft_model") != std::string::npos);
    CHECK(what.find("tokenizer") != std::string::npos);
  }
}
