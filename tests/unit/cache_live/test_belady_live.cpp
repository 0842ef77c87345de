// Belady in a live run and the simulator's exactness: a run's own trace,
// replayed by `k3host sim`'s Replay at the run's slot count, gives exactly the run's hits
// and requests for every policy — prefill in chunks of several tokens, decode one token at
// a time, caches small enough to evict and to split a chunk's experts into several
// batches. `cache.policy: belady` with `cache.future` reaches the simulator's belady count
// exactly and is >= every online policy; traces of another prompt or geometry, damaged
// or missing files, and runs that leave the recorded path are refused with the file and
// the reason (the request index for a divergence).
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <k3/error.hpp>
#include <k3/geometry.hpp>
#include <k3/job.hpp>
#include <k3/pipeline.hpp>
#include <k3/plan.hpp>
#include <k3/plugin_host.hpp>
#include <k3/sim.hpp>
#include <k3/trace.hpp>

#include "test_models.hpp"

namespace {

k3::test::ScratchCleanup cleanup;

const char* const kOnline[] = {"lru", "s3fifo", "lfu", "sieve", "lecar", "nextuse"};

bool have_plugin(k3::PluginHost& host, const std::string& name) {
  return std::any_of(host.plugins().begin(), host.plugins().end(),
                     [&](const k3::PluginInfo& p) { return p.kind == k3::PluginKind::cache && p.name == name; });
}

/// memory.expert_cache_gb for exactly `slots` expert slots of `geometry` (half a slot over,
/// so rounding cannot lose one).
std::string cache_gb_for(const std::string& geometry, std::uint64_t slots) {
  k3::PlanInputs probe;
  probe.available = 1ull << 40;
  const auto full = k3::plan_memory(k3::load_geometry(geometry).config, probe);
  return std::to_string((static_cast<double>(slots) + 0.5) * static_cast<double>(full.expert_slot_bytes) / 1e9);
}

struct Run {
  std::string geometry = "tiny";
  std::string ids = "[3,14,15,92,65,35,89,79,32,38]";
  int new_tokens = 10;
  int prefill_chunk = 4;
  std::uint64_t slots = 3;
  std::string policy = "lru";
  std::string future;     ///< cache.future
  std::string trace_out;  ///< trace.out
};

k3::JobReport run(const Run& r) {
  std::vector<std::string> sets = {"model.path=" + k3::test::test_model(r.geometry).string(),
                                   "model.generate_if_missing=false",
                                   "job.ids=" + r.ids,
                                   "job.max_new_tokens=" + std::to_string(r.new_tokens),
                                   "job.prefill_chunk=" + std::to_string(r.prefill_chunk),
                                   "job.stop_at_eos=false",
                                   "job.report=''",
                                   "threads=1",
                                   "kernels.set=scalar",
                                   "memory.trunk_gb=1000",
                                   "memory.expert_cache_gb=" + cache_gb_for(r.geometry, r.slots),
                                   "cache.policy=" + r.policy,
                                   "cache.prefetch.depth=0",  // the simulator does not prefetch
                                   "cache.future=" + (r.future.empty() ? std::string("''") : r.future),
                                   "trace.out=" + (r.trace_out.empty() ? std::string("''") : r.trace_out)};
  const k3::Pipeline p = k3::load_pipeline(std::string(K3_SOURCE_DIR) + "/configs/default.yaml", sets);
  return k3::run_job(p);
}

std::string scratch_file(const std::string& name) { return (k3::test::scratch_dir() / name).string(); }

k3::ReplayCounts simulate(k3::PluginHost& host, const k3::Trace& trace, const std::string& policy,
                          std::uint64_t slots) {
  const auto p = host.create_cache(policy, {});
  return k3::Replay(trace).run(*p, policy, slots);
}

}  // namespace

TEST_CASE("live: every policy's hits equal the simulator's on the run's own trace and belady live beats them all",
          "[live][belady]") {
  k3::PluginHost host;
  if (!have_plugin(host, "belady")) {
    WARN("SKIPPED: the belady cache plugin is not built (plugins/cache/belady)");
    return;
  }
  // tiny: 5 MoE layers x 8 experts, top-2. 6 slots: a 4-token chunk asks for up to 8
  // distinct experts of a layer, served in batches of 6; 20 slots: half of all experts.
  for (const std::uint64_t slots : {std::uint64_t{6}, std::uint64_t{20}}) {
    CAPTURE(slots);
    std::string reference_trace;
    k3::Trace reference;
    std::vector<std::pair<std::string, std::uint64_t>> online_hits;
    for (const char* policy : kOnline) {
      if (!have_plugin(host, policy)) {
        WARN("SKIP cache policy " << policy << ": plugin not built");
        continue;
      }
      CAPTURE(policy);
      Run r;
      r.slots = slots;
      r.policy = policy;
      r.trace_out = scratch_file(std::string(policy) + "-" + std::to_string(slots) + ".k3trace");
      const k3::JobReport rep = run(r);
      REQUIRE(rep.streaming);
      REQUIRE(rep.plan.expert_slots == slots);
      const k3::Trace t = k3::read_trace(r.trace_out);
      if (reference_trace.empty()) {
        reference_trace = r.trace_out;
        reference = t;
        // The run really has multi-token groups and groups larger than the cache.
        const k3::TraceStats st = k3::trace_stats(t);
        CHECK(st.groups < st.requests / t.header.top_k);
        if (slots == 6) CHECK(st.max_group > slots);
      }
      CHECK(t.records == reference.records);  // the request stream does not depend on the policy
      const k3::ReplayCounts sim = simulate(host, t, policy, slots);
      CHECK(sim.requests == rep.io.expert_requests);
      CHECK(sim.hits == rep.io.expert_hits);
      CHECK(sim.evictions > 0);
      online_hits.emplace_back(policy, rep.io.expert_hits);
    }
    REQUIRE_FALSE(reference_trace.empty());

    Run b;
    b.slots = slots;
    b.policy = "belady";
    b.future = reference_trace;
    b.trace_out = scratch_file("belady-" + std::to_string(slots) + ".k3trace");
    const k3::JobReport rep = run(b);
    CHECK(k3::read_trace(b.trace_out).records == reference.records);
    const k3::ReplayCounts sim = simulate(host, reference, "belady", slots);
    CHECK(rep.io.expert_requests == sim.requests);
    CHECK(rep.io.expert_hits == sim.hits);
    for (const auto& [policy, hits] : online_hits) {
      INFO("belady " << rep.io.expert_hits << " hits, " << policy << " " << hits);
      CHECK(rep.io.expert_hits >= hits);
    }
  }
}

TEST_CASE("live: demo LRU and belady live equal the simulator", "[live][belady]") {
  k3::PluginHost host;
  if (!have_plugin(host, "belady") || !have_plugin(host, "lru")) {
    WARN("SKIPPED: the lru or belady cache plugin is not built");
    return;
  }
  Run r;
  r.geometry = "demo";
  r.ids = "[1,2,3,4,5,6,7,8]";
  r.new_tokens = 4;
  r.prefill_chunk = 4;
  r.slots = 120;  // demo: 15 MoE layers x 64 experts, top-6 -> 90 slots per token
  r.trace_out = scratch_file("demo-lru.k3trace");
  const k3::JobReport lru = run(r);
  REQUIRE(lru.plan.expert_slots == r.slots);
  const k3::Trace t = k3::read_trace(r.trace_out);
  CHECK(simulate(host, t, "lru", r.slots).hits == lru.io.expert_hits);
  Run b = r;
  b.policy = "belady";
  b.future = r.trace_out;
  b.trace_out.clear();
  const k3::JobReport belady = run(b);
  CHECK(simulate(host, t, "belady", r.slots).hits == belady.io.expert_hits);
  CHECK(belady.io.expert_hits > lru.io.expert_hits);
}

TEST_CASE("live: cache.future refuses traces of another run and damaged files and stops a divergent run",
          "[live][belady]") {
  k3::PluginHost host;
  if (!have_plugin(host, "belady")) {
    WARN("SKIPPED: the belady cache plugin is not built (plugins/cache/belady)");
    return;
  }
  Run rec;
  rec.trace_out = scratch_file("recorded.k3trace");
  rec.new_tokens = 2;
  run(rec);
  const std::string trace = rec.trace_out;
  Run b = rec;
  b.policy = "belady";
  b.future = trace;
  b.trace_out.clear();
  CHECK_NOTHROW(run(b));  // the same run follows its trace

  SECTION("belady without a future says how to record one") {
    Run r = b;
    r.future.clear();
    CHECK_THROWS_AS(run(r), k3::UsageError);
    CHECK_THROWS_WITH(run(r), Catch::Contains("cache.future") && Catch::Contains("trace.out=FILE"));
  }
  SECTION("another prompt") {
    Run r = b;
    r.ids = "[3,14,15,92,65,36,89,79,32,38]";
    CHECK_THROWS_AS(run(r), k3::UsageError);
    CHECK_THROWS_WITH(run(r), Catch::Contains(trace) && Catch::Contains("another prompt"));
    r.policy = "lru";  // checked whenever it is set
    CHECK_THROWS_WITH(run(r), Catch::Contains("another prompt"));
  }
  SECTION("another geometry") {
    Run r = b;
    r.geometry = "tiny2";
    r.ids = "[3,14,15,92,65,35,89,79,32,38]";  // the same prompt
    CHECK_THROWS_AS(run(r), k3::UsageError);
    CHECK_THROWS_WITH(run(r), Catch::Contains(trace) && Catch::Contains("another geometry"));
  }
  SECTION("a damaged or missing file") {
    std::ifstream in(trace, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(bytes.size() > 88);
    bytes[86] ^= 1;  // an expert id of the first record
    const std::string bad = scratch_file("damaged.k3trace");
    std::ofstream(bad, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    Run r = b;
    r.future = bad;
    CHECK_THROWS_AS(run(r), k3::UsageError);
    CHECK_THROWS_WITH(run(r), Catch::Contains(bad) && Catch::Contains("checksum"));
    r.future = scratch_file("missing.k3trace");
    CHECK_THROWS_WITH(run(r), Catch::Contains("missing.k3trace"));
  }
  SECTION("a run longer than the trace fails at the first request past its end") {
    const std::uint64_t recorded = k3::read_trace(trace).records.size();
    Run r = b;
    r.new_tokens = 5;
    CHECK_THROWS_AS(run(r), k3::UsageError);
    CHECK_THROWS_WITH(run(r), Catch::Contains(trace) && Catch::Contains("request " + std::to_string(recorded)) &&
                                  Catch::Contains("ends after " + std::to_string(recorded) + " requests"));
  }
  SECTION("a run that serves the requests in other groups") {
    // Chunks of 2 instead of 4: the first group (layer 1, tokens 0-1, 2 x top-2 requests)
    // asks for what the trace recorded, but the trace's group goes on at request 4.
    Run r = b;
    r.prefill_chunk = 2;
    CHECK_THROWS_AS(run(r), k3::UsageError);
    CHECK_THROWS_WITH(run(r), Catch::Contains("request 4") && Catch::Contains("other groups"));
  }
}
