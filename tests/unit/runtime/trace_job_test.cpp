// trace.out records every routed-expert request of a live run, in request order, and the
// request stream does not depend on the memory budget or the cache policy.
#include <catch2/catch.hpp>

#include <map>

#include <k3/job.hpp>
#include <k3/pipeline.hpp>
#include <k3/trace.hpp>

#include "test_models.hpp"

namespace {

k3::test::ScratchCleanup cleanup;

k3::Trace traced_run(const std::string& name, std::vector<std::string> extra) {
  const auto file = k3::test::scratch_dir() / (name + ".k3trace");
  std::vector<std::string> sets = {"model.path=" + k3::test::test_model("tiny").string(),
                                   "model.generate_if_missing=false",
                                   "job.ids=[3,14,15,92,65,35]",
                                   "job.max_new_tokens=5",
                                   "job.stop_at_eos=false",
                                   "job.report=''",
                                   "threads=1",
                                   "kernels.set=scalar",
                                   "trace.out=" + file.string()};
  sets.insert(sets.end(), extra.begin(), extra.end());
  const k3::Pipeline p = k3::load_pipeline(std::string(K3_SOURCE_DIR) + "/configs/default.yaml", sets);
  const k3::JobReport r = k3::run_job(p);
  CHECK(r.trace_file == file);
  return k3::read_trace(file);
}

}  // namespace

TEST_CASE("trace.out records every expert request of a run", "[trace][job]") {
  const k3::Trace t = traced_run("plain", {});
  const auto& h = t.header;
  REQUIRE(h.layers > 0);
  REQUIRE(h.top_k > 0);
  // Tokens fed: the 6 prompt ids and the first 4 generated ids (the 5th is never fed).
  const std::size_t fed = 6 + 4;
  REQUIRE(t.records.size() % (fed * h.top_k) == 0);
  const std::size_t moe_layers = t.records.size() / (fed * h.top_k);
  CHECK(moe_layers >= 1);
  CHECK(moe_layers < h.layers);  // tiny has a dense layer 0
  // Each (position, MoE layer) appears once, as top-k distinct experts in a row (in a
  // chunked prefill the order is layer by layer over the chunk's positions).
  std::map<std::pair<std::uint32_t, std::uint16_t>, int> seen;
  for (std::size_t i = 0; i < t.records.size(); i += h.top_k) {
    ++seen[{t.records[i].position, t.records[i].layer}];
    for (std::size_t a = i; a < i + h.top_k; ++a) {
      CHECK(t.records[a].position == t.records[i].position);
      CHECK(t.records[a].layer == t.records[i].layer);
      for (std::size_t b = a + 1; b < i + h.top_k; ++b) CHECK(t.records[a].expert != t.records[b].expert);
    }
  }
  CHECK(seen.size() == fed * moe_layers);
  for (const auto& kv : seen) CHECK(kv.second == 1);
  CHECK(h.prompt_hash != 0);
  CHECK(h.arch_fingerprint != 0);
}

TEST_CASE("the request stream is the same at every budget and with every policy", "[trace][job]") {
  const k3::Trace a = traced_run("resident", {});
  const k3::Trace b =
      traced_run("streamed", {"memory.trunk_gb=0.0001", "memory.expert_cache_gb=0.00001", "cache.policy=s3fifo"});
  CHECK(a.records == b.records);
  CHECK(a.header.prompt_hash == b.header.prompt_hash);
}
