// Batched passes (k3/batch.hpp, maths/pass.hpp): several sequences fed in one forward pass
// get, row for row, the logits bits each gets fed alone, whatever shares the pass (other
// prompts, lengths, arrival steps, all or last positions, tentative chunks that keep a
// prefix), across kernel sets, thread counts and streamed budgets.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <numeric>
#include <set>
#include <span>
#include <vector>

#include <k3/batch.hpp>
#include <k3/error.hpp>
#include <k3/geometry.hpp>
#include <k3/model.hpp>
#include <k3/plan.hpp>
#include <k3/plugin_host.hpp>
#include <k3/sampler.hpp>

#include "test_models.hpp"

namespace {

k3::test::ScratchCleanup cleanup;

constexpr std::int64_t kContext = 64;

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

/// A budget that streams `geometry`: a third of the trunk pinned, top-k expert slots.
k3::ModelSettings streamed(const std::string& geometry, const std::string& kernels, int threads) {
  k3::ModelSettings s = resident(kernels, threads);
  k3::PlanInputs probe = s.memory;
  probe.available = 1ull << 40;
  const auto full = k3::plan_memory(k3::load_geometry(geometry).config, probe);
  const std::uint64_t trunk = std::accumulate(full.layer_bytes.begin(), full.layer_bytes.end(), std::uint64_t{0});
  s.memory.trunk_gb = static_cast<double>(trunk) / 3 / 1e9;
  s.memory.expert_cache_gb = static_cast<double>(full.min_expert_slots * full.expert_slot_bytes) / 1e9;
  return s;
}

std::uint64_t next_random(std::uint64_t& x) {
  x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x >> 33;
}

/// Prompts of different lengths (and different ids).
std::vector<std::vector<std::uint32_t>> prompts(const k3::ModelConfig& c) {
  std::vector<std::vector<std::uint32_t>> out;
  std::uint64_t x = 99;
  for (std::size_t len : {11u, 17u, 6u, 14u}) {
    std::vector<std::uint32_t> ids;
    for (std::size_t i = 0; i < len; ++i)
      ids.push_back(static_cast<std::uint32_t>(next_random(x) % static_cast<std::uint64_t>(c.vocab_size)));
    out.push_back(std::move(ids));
  }
  return out;
}

/// The logits of every position of `ids`, fed one token at a time alone.
std::vector<std::vector<float>> alone(k3::Model& m, const std::vector<std::uint32_t>& ids) {
  k3::Session s(m, kContext);
  std::vector<std::vector<float>> rows;
  std::vector<float> logits;
  for (std::uint32_t id : ids) {
    s.feed({&id, 1}, false, logits);
    rows.push_back(logits);
  }
  return rows;
}

/// The logits rows a batched run hands out: per sequence, position → row.
using Seen = std::vector<std::map<std::size_t, std::vector<float>>>;

/// Feeds the prompts in batched passes: sequence i joins at step i (later arrivals), each
/// step feeds every joined sequence a chunk of 1-4 of its next tokens (some wanting every
/// position's logits), and every third step one sequence's chunk is tentative, with two
/// wrong tokens after its true ones that it keeps none of. Returns every row seen.
Seen batched(k3::Model& m, const std::vector<std::vector<std::uint32_t>>& ids) {
  const std::size_t n = ids.size();
  std::vector<std::unique_ptr<k3::Session>> sessions;
  for (std::size_t i = 0; i < n; ++i) sessions.push_back(std::make_unique<k3::Session>(m, kContext));
  k3::BatchForward pass(m, 24, kContext, n);
  Seen seen(n);
  std::vector<std::size_t> fed(n, 0);
  std::uint64_t x = 7;
  k3::PassOutput out;
  const std::vector<float>& logits = out.logits;
  const auto V = static_cast<std::size_t>(m.config().vocab_size);
  for (std::size_t step = 0;; ++step) {
    std::vector<k3::BatchFeed> feeds;
    std::vector<std::size_t> who, true_len;
    std::vector<std::vector<std::uint32_t>> chunks;
    chunks.reserve(n);
    for (std::size_t i = 0; i < n && i <= step; ++i) {
      if (fed[i] == ids[i].size()) continue;
      const std::size_t len = std::min<std::size_t>(1 + next_random(x) % 4, ids[i].size() - fed[i]);
      std::vector<std::uint32_t> chunk(ids[i].begin() + static_cast<std::ptrdiff_t>(fed[i]),
                                       ids[i].begin() + static_cast<std::ptrdiff_t>(fed[i] + len));
      const bool tentative = step % 3 == 2 && feeds.empty();
      if (tentative) chunk.insert(chunk.end(), {ids[i][0], ids[i][1]});  // drafts the check refuses
      chunks.push_back(std::move(chunk));
      feeds.push_back({sessions[i].get(), chunks.back(), next_random(x) % 2 == 0, tentative});
      who.push_back(i);
      true_len.push_back(len);
    }
    if (feeds.empty()) break;
    pass.run(feeds, out);
    CHECK(out.picks.empty());  // no feed asked for any
    std::size_t row = 0;
    for (std::size_t f = 0; f < feeds.size(); ++f) {
      const std::size_t i = who[f], len = true_len[f];
      const bool every = feeds[f].all_positions || feeds[f].tentative;
      for (std::size_t t = every ? 0 : feeds[f].tokens.size() - 1; t < feeds[f].tokens.size(); ++t, ++row)
        if (t < len)
          seen[i][fed[i] + t].assign(logits.begin() + static_cast<std::ptrdiff_t>(row * V),
                                     logits.begin() + static_cast<std::ptrdiff_t>((row + 1) * V));
      if (feeds[f].tentative) sessions[i]->keep_tentative(len);
      fed[i] += len;
      CHECK(sessions[i]->position() == static_cast<std::int64_t>(fed[i]));
    }
  }
  return seen;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// Every row `seen` holds equals the row of feeding its sequence alone; returns the rows compared.
std::size_t check_against(const Seen& seen, const std::vector<std::vector<std::vector<float>>>& ref) {
  std::size_t compared = 0;
  for (std::size_t i = 0; i < seen.size(); ++i)
    for (const auto& [pos, row] : seen[i]) {
      CAPTURE(i, pos);
      CHECK(same_bits(row, ref[i][pos]));
      ++compared;
    }
  return compared;
}

}  // namespace

TEST_CASE("a batched pass gives every sequence the logits bits it gets fed alone", "[model][batch][identity]") {
  k3::PluginHost host;
  for (const char* geometry : {"tiny", "tiny2"}) {  // KDA and MLA layers in both orders
    CAPTURE(geometry);
    k3::Model m(k3::test::test_model(geometry), host, resident("scalar", 1));
    const auto ids = prompts(m.config());
    std::vector<std::vector<std::vector<float>>> ref;
    for (const auto& p : ids) ref.push_back(alone(m, p));
    const Seen seen = batched(m, ids);
    // Every sequence shows rows, and most positions are compared (some passes want only a
    // chunk's last row).
    std::size_t positions = 0;
    for (const auto& p : ids) positions += p.size();
    for (const auto& s : seen) CHECK(!s.empty());
    CHECK(check_against(seen, ref) * 2 > positions);
    // The sequences' logits differ from each other: a pass that mixed them up would show.
    CHECK_FALSE(same_bits(ref[0][3], ref[1][3]));
  }
}

TEST_CASE("batched passes give the bits of a sequence alone across kernel sets, thread counts and streamed budgets",
          "[model][batch][identity][kernels][threads]") {
  k3::PluginHost host;
  const std::string dir = k3::test::test_model("tiny");
  k3::Model reference(dir, host, resident("scalar", 1));
  const auto ids = prompts(reference.config());
  std::vector<std::vector<std::vector<float>>> ref;
  for (const auto& p : ids) ref.push_back(alone(reference, p));
  std::vector<std::pair<std::string, k3::ModelSettings>> runs;
  for (const auto& p : host.plugins())
    if (p.kind == k3::PluginKind::kernels && p.score > 0)
      runs.emplace_back(p.name + ", 2 threads", resident(p.name, 2));
  runs.emplace_back("streamed, scalar, 1 thread", streamed("tiny", "scalar", 1));
  runs.emplace_back("streamed, auto, 2 threads", streamed("tiny", "auto", 2));
  for (const auto& [what, settings] : runs) {
    CAPTURE(what);
    k3::Model m(dir, host, settings);
    if (what.rfind("streamed", 0) == 0) CHECK(m.streaming());
    CHECK(check_against(batched(m, ids), ref) > 0);
  }
}

TEST_CASE("a batched pass refuses what a session refuses, and a failed pass keeps no tentative token",
          "[model][batch][errors]") {
  k3::PluginHost host;
  k3::Model m(k3::test::test_model("tiny"), host, resident("scalar", 1));
  k3::Session a(m, kContext), b(m, kContext);
  k3::BatchForward pass(m, 8, kContext, 2);
  k3::PassOutput out;
  std::vector<float> logits;
  const std::vector<std::uint32_t> ok = {1, 2, 3};
  const std::vector<std::uint32_t> bad = {4, static_cast<std::uint32_t>(m.config().vocab_size)};
  // An id outside the vocabulary: refused before any compute, nothing fed to either.
  const std::vector<k3::BatchFeed> feeds = {{&a, ok, false, true}, {&b, bad}};
  CHECK_THROWS_AS(pass.run(feeds, out), k3::UsageError);
  CHECK(a.position() == 0);
  CHECK(b.position() == 0);
  // The same session twice in a pass.
  const std::vector<k3::BatchFeed> twice = {{&a, ok}, {&a, ok}};
  CHECK_THROWS_AS(pass.run(twice, out), k3::RuntimeError);
  // A tentative feed must be closed before the session is fed again.
  const std::vector<k3::BatchFeed> tentative = {{&a, ok, false, true}};
  pass.run(tentative, out);
  CHECK(out.logits.size() == 3 * static_cast<std::size_t>(m.config().vocab_size));  // every row of a tentative feed
  CHECK_THROWS_AS(a.feed(ok, false, logits), k3::RuntimeError);
  CHECK_THROWS_AS(a.keep_tentative(4), k3::RuntimeError);
  a.keep_tentative(1);
  CHECK(a.position() == 1);
  CHECK_THROWS_AS(a.keep_tentative(0), k3::RuntimeError);  // nothing open any more
}

namespace {

/// The distinct (layer, expert) pairs routed, and the requests.
struct RoutedExperts : k3::RoutingListener {
  std::set<std::pair<std::size_t, std::uint32_t>> distinct;
  std::size_t requests = 0;
  void on_route(std::int64_t, std::size_t layer, std::span<const std::uint32_t> experts) override {
    for (std::uint32_t e : experts) distinct.emplace(layer, e);
    requests += experts.size();
  }
};

}  // namespace

TEST_CASE("a batched pass reads each streamed trunk layer once and each routed expert once for all its sequences",
          "[model][batch][streaming]") {
  k3::PluginHost host;
  k3::Model m(k3::test::test_model("tiny"), host, streamed("tiny", "scalar", 1));
  REQUIRE(m.streaming());
  const k3::ModelConfig& c = m.config();
  constexpr std::size_t kSequences = 8;
  std::vector<std::unique_ptr<k3::Session>> sessions;
  for (std::size_t i = 0; i < kSequences; ++i) sessions.push_back(std::make_unique<k3::Session>(m, kContext));
  k3::BatchForward pass(m, kSequences, kContext, kSequences);
  RoutedExperts routed;
  for (auto& s : sessions) s->set_routing_listener(&routed);
  k3::PassOutput out;
  std::uint64_t x = 5;
  // One pass of `n` sequences, a token each (their second: the first pass filled the pipes);
  // what it read.
  const auto one_pass = [&](std::size_t n) {
    std::vector<std::uint32_t> ids(n);
    std::vector<k3::BatchFeed> feeds;
    for (std::size_t i = 0; i < n; ++i) {
      ids[i] = static_cast<std::uint32_t>(next_random(x) % static_cast<std::uint64_t>(c.vocab_size));
      feeds.push_back({sessions[i].get(), std::span<const std::uint32_t>(&ids[i], 1)});
    }
    routed = {};
    const k3::StreamStats before = m.stream_stats();
    pass.run(feeds, out);
    const k3::StreamStats after = m.stream_stats();
    CHECK(out.logits.size() == n * static_cast<std::size_t>(c.vocab_size));
    return std::pair{after.trunk_bytes - before.trunk_bytes, after.expert_bytes - before.expert_bytes};
  };
  one_pass(kSequences);  // every session at position 1
  const auto [trunk_one, experts_one] = one_pass(1);
  const auto [trunk_all, experts_all] = one_pass(kSequences);
  // The streamed trunk: read once per pass, however many sequences it carries.
  CHECK(trunk_one > 0);
  CHECK(trunk_all == trunk_one);
  // The routed experts: each (layer, expert) that any row chose is read at most once, so
  // the bytes are bounded by the distinct experts, about half the requests of 8 tokens
  // over 8 experts with top-2 at each MoE layer.
  std::size_t moe_layers = 0;
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) moe_layers += c.is_dense(l) ? 0 : 1;
  CHECK(routed.requests == kSequences * static_cast<std::size_t>(c.num_experts_per_token) * moe_layers);
  CHECK(routed.distinct.size() * 3 <= routed.requests * 2);
  CHECK(experts_all > experts_one);
  CHECK(experts_all <= routed.distinct.size() * m.plan().expert_slot_bytes);
}

TEST_CASE("a pass picks what a caller draws from each row fed alone, and answers only the logits a feed asks for",
          "[model][batch][sampling]") {
  k3::PluginHost host;
  k3::Model m(k3::test::test_model("tiny"), host, resident("scalar", 1));
  const auto V = static_cast<std::size_t>(m.config().vocab_size);
  // Settings that use every part of the sampler, the repeat penalty's context included.
  k3::SamplingSettings sampled{.temperature = 0.9,
                               .top_k = 40,
                               .top_p = 0.95,
                               .min_p = 0.01,
                               .repeat_penalty = 1.4,
                               .repeat_last_n = 6,
                               .seed = 11};
  k3::SamplingSettings greedy{.repeat_penalty = 1.6, .repeat_last_n = -1};
  const auto ids = prompts(m.config());
  // The reference: each sequence fed a token at a time alone, each row drawn by the caller
  // at the position after its token, on every id up to it.
  const auto drawn_alone = [&](const std::vector<std::uint32_t>& p, const k3::SamplingSettings& s) {
    k3::Session alone(m, kContext);
    std::vector<float> row;
    std::vector<std::uint32_t> picks;
    for (std::uint32_t id : p) {
      alone.feed({&id, 1}, false, row);
      picks.push_back(k3::sample_token(row.data(), V, s, alone.position(), alone.tokens()));
    }
    return std::pair{picks, row};
  };
  const std::vector<std::uint32_t> picks0 = drawn_alone(ids[0], sampled).first;
  const std::vector<std::uint32_t> picks1 = drawn_alone(ids[1], greedy).first;
  const std::vector<std::uint32_t> picks2 = drawn_alone(ids[2], sampled).first;
  // The sampled draws are not all the greedy pick: the settings reach the sampler.
  CHECK(picks0 != drawn_alone(ids[0], greedy).first);

  k3::Session a(m, kContext), b(m, kContext), c(m, kContext);
  k3::BatchForward pass(m, 24, kContext, 3);
  k3::PassOutput out;
  // A 4-token prefix of each first, then: a every row picked without logits, b a tentative
  // chunk picked with its logits, c its last row picked with its logits.
  const std::span<const std::uint32_t> a0(ids[0].data(), 4), b0(ids[1].data(), 4), c0(ids[2].data(), 4);
  const std::vector<k3::BatchFeed> first = {{&a, a0, false, false, false, nullptr},
                                            {&b, b0, false, false, false, nullptr},
                                            {&c, c0, false, false, true, &sampled}};
  pass.run(first, out);
  REQUIRE(out.picks.size() == 1);
  CHECK(out.picks[0] == picks2[3]);
  CHECK(out.logits.size() == V);  // c's last row; a and b asked for nothing
  const std::span<const std::uint32_t> a1(ids[0].data() + 4, 5), b1(ids[1].data() + 4, 3), c1(ids[2].data() + 4, 2);
  const std::vector<k3::BatchFeed> second = {{&a, a1, true, false, false, &sampled},
                                             {&b, b1, false, true, true, &greedy},
                                             {&c, c1, false, false, true, &sampled}};
  pass.run(second, out);
  b.keep_tentative(3);
  const std::vector<std::uint32_t> want = {picks0[4], picks0[5], picks0[6], picks0[7], picks0[8],
                                           picks1[4], picks1[5], picks1[6], picks2[5]};
  CHECK(out.picks == want);
  // b's three rows, then c's one: the last of each is the alone run's row at that position.
  REQUIRE(out.logits.size() == 4 * V);
  const auto row_of = [&](std::size_t r) {
    return std::vector<float>(out.logits.begin() + static_cast<std::ptrdiff_t>(r * V),
                              out.logits.begin() + static_cast<std::ptrdiff_t>((r + 1) * V));
  };
  const auto prefix = [&](std::size_t i, std::size_t n) {
    return std::vector<std::uint32_t>(ids[i].begin(), ids[i].begin() + static_cast<std::ptrdiff_t>(n));
  };
  CHECK(same_bits(row_of(3), drawn_alone(prefix(2, 6), sampled).second));
  CHECK(same_bits(row_of(2), drawn_alone(prefix(1, 7), greedy).second));
}
