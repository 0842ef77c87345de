// The memory plan: the full K3 geometry at the laptop and ultra presets (targets from issue
// 4), largest-first pinning, scaled budgets, "fit", sequences decoded together
// (serve.parallel) and the exit-3 refusal.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <numeric>

#include <k3/error.hpp>
#include <k3/geometry.hpp>
#include <k3/pipeline.hpp>
#include <k3/plan.hpp>

namespace {

const std::filesystem::path kSrc = K3_SOURCE_DIR;
constexpr std::uint64_t kPlenty = 4'000'000'000'000ull;  // 4 TB: "available" never limits

/// A geometry's config, loaded once per test binary (loading K3's takes seconds under the
/// sanitizers, and a case plans it many times).
const k3::ModelConfig& geometry_config(const std::string& name) {
  static std::map<std::string, k3::ModelConfig> loaded;
  auto it = loaded.find(name);
  if (it == loaded.end()) it = loaded.emplace(name, k3::load_geometry(name).config).first;
  return it->second;
}

k3::MemoryPlan preset_plan(const std::string& preset, const std::string& geometry, std::vector<std::string> sets = {}) {
  sets.push_back("model.geometry=" + geometry);
  const k3::Pipeline p = k3::load_pipeline(kSrc / "presets" / (preset + ".yaml"), sets);
  k3::PlanInputs in = k3::plan_inputs(p);
  in.available = kPlenty;
  return k3::plan_memory(geometry_config(geometry), in);
}

std::uint64_t sum_of_parts(const k3::MemoryPlan& p) {
  return p.trunk_bytes() + p.expert_bytes() + p.embedding_bytes + p.lm_head_bytes + p.kda_state_bytes + p.mla_kv_bytes +
         p.speculative_bytes + p.router_copy_bytes + p.buffer_bytes + p.overhead_bytes;
}

/// Pinning invariants checked from the per-layer sizes alone.
void check_pins(const k3::MemoryPlan& p) {
  std::uint64_t pinned = 0, largest_unpinned = 0;
  std::size_t count = 0;
  for (std::size_t i = 0; i < p.layer_bytes.size(); ++i) {
    if (p.pinned[i]) {
      pinned += p.layer_bytes[i];
      ++count;
    } else {
      largest_unpinned = std::max(largest_unpinned, p.layer_bytes[i]);
    }
  }
  CHECK(count == p.pinned_count);
  CHECK(pinned == p.pinned_bytes);
  if (count == p.layer_bytes.size()) {
    CHECK(p.ring_slots == 0);
    return;
  }
  CHECK(p.ring_slots >= 1);
  std::uint64_t largest_unpinned_slot = 0;  // a split layer's ring part is its core
  for (std::size_t i = 0; i < p.layer_bytes.size(); ++i)
    if (!p.pinned[i])
      largest_unpinned_slot =
          std::max(largest_unpinned_slot, p.split_dense_ffn ? p.layer_core_bytes[i] : p.layer_bytes[i]);
  CHECK(p.ring_slot_bytes == largest_unpinned_slot);
  // Greedy: no unpinned layer would still fit next to the ring and the pinned set.
  const std::uint64_t spent = p.trunk_bytes();
  if (spent <= p.trunk_budget)
    for (std::size_t i = 0; i < p.layer_bytes.size(); ++i)
      if (!p.pinned[i] && p.layer_bytes[i] < largest_unpinned) CHECK(spent + p.layer_bytes[i] > p.trunk_budget);
}

}  // namespace

TEST_CASE("speculative drafts add their verification journals to the plan") {
  for (const char* preset : {"laptop", "ultra"}) {
    CAPTURE(preset);
    const auto off = preset_plan(preset, "k3", {"job.speculative.max_draft=0"});
    const auto on = preset_plan(preset, "k3", {"job.speculative.max_draft=4"});
    const auto more = preset_plan(preset, "k3", {"job.speculative.max_draft=8"});
    const auto recompute = preset_plan(preset, "k3", {"job.speculative.max_draft=4", "job.mode=recompute"});
    CHECK(off.speculative_bytes == 0);
    CHECK(recompute.speculative_bytes == 0);  // no drafts in recompute mode
    CHECK(on.speculative_bytes > 0);
    CHECK(more.speculative_bytes > on.speculative_bytes);
    CHECK(on.total == sum_of_parts(on));
    // Counted before the budgets are shared out: the trunk and the cache give way, the
    // total stays within what the preset allowed without drafts plus the journals.
    CHECK(on.total <= off.total + on.speculative_bytes);
    // Less than the alternative, a copy of every KDA state to go back to.
    CHECK(on.speculative_bytes < on.kda_state_bytes);
    CHECK(on.table().find("speculative") != std::string::npos);
  }
}

TEST_CASE("k3 geometry: laptop plan within 7.5 GB, ultra within 3 GB, both streaming") {
  const auto laptop = preset_plan("laptop", "k3");
  const auto ultra = preset_plan("ultra", "k3");
  std::printf("k3 laptop plan:\n%s", laptop.table().c_str());
  std::printf("k3 ultra plan:\n%s", ultra.table().c_str());
  CHECK(laptop.total <= 7'500'000'000ull);
  CHECK(ultra.total <= 3'000'000'000ull);
  CHECK(ultra.total < laptop.total);
  // Layer 0 (dense FFN, the largest layer) is split at both presets: the ring holds a
  // smaller layer, and laptop gains a read-ahead slot it had no room for.
  for (const auto* p : {&laptop, &ultra}) {
    CHECK(p->split_dense_ffn);
    CHECK(p->split_layers == 1);
    CHECK(p->ring_slot_bytes < p->layer_bytes[0]);
    CHECK(p->layer_core_bytes[0] < p->layer_bytes[0]);
  }
  CHECK(laptop.ring_slots == 2);
  CHECK(laptop.total == sum_of_parts(laptop));
  CHECK(ultra.total == sum_of_parts(ultra));
  CHECK(laptop.streams_trunk());
  CHECK(laptop.streams_experts());
  CHECK(ultra.lm_head_chunk_rows > 0);
  CHECK(laptop.lm_head_chunk_rows == 0);
  // K3: 93 layers; the MLA latent is (kv_lora + rope) floats per position per MLA layer.
  const auto c = k3::load_geometry("k3").config;
  CHECK(laptop.layer_bytes.size() == 93);
  CHECK(laptop.mla_kv_bytes ==
        c.mla_layers.size() * 4096ull * static_cast<std::uint64_t>(c.kv_lora_rank + c.qk_rope_head_dim) * 4);
  CHECK(laptop.expert_slots == laptop.expert_budget / laptop.expert_slot_bytes);
  check_pins(laptop);
  check_pins(ultra);
}

TEST_CASE("k3 geometry: split_dense_ffn off keeps layer 0 whole in the ring, on forces the split") {
  const auto c = k3::load_geometry("k3").config;
  k3::PlanInputs in;
  in.available = kPlenty;
  in.trunk_gb = 3;
  in.expert_cache_gb = 1;
  in.split_dense_ffn = k3::PlanInputs::SplitDenseFfn::off;
  const auto whole = k3::plan_memory(c, in);
  CHECK_FALSE(whole.split_dense_ffn);
  CHECK(whole.ring_slot_bytes == *std::max_element(whole.layer_bytes.begin(), whole.layer_bytes.end()));
  CHECK(whole.ring_slots == 1);  // 2 x 2.34 GB do not fit 3 GB
  check_pins(whole);
  in.split_dense_ffn = k3::PlanInputs::SplitDenseFfn::on;
  const auto split = k3::plan_memory(c, in);
  CHECK(split.split_dense_ffn);
  CHECK(split.ring_slot_bytes < whole.ring_slot_bytes);
  CHECK(split.trunk_bytes() <= split.trunk_budget);
  check_pins(split);
  // A budget that pins layer 0 leaves nothing to split.
  in.trunk_gb = 40;
  const auto pinned = k3::plan_memory(c, in);
  CHECK(pinned.pinned[0]);
  CHECK_FALSE(pinned.split_dense_ffn);
}

TEST_CASE("plan: largest layers pinned first, ring holds the largest streamed layer") {
  const auto c = k3::load_geometry("demo").config;
  k3::PlanInputs in;
  in.available = kPlenty;
  in.expert_cache_gb = 0.001;
  const auto all = k3::plan_memory(c, [&] {
    auto x = in;
    x.trunk_gb = 1000;
    return x;
  }());
  CHECK(all.pinned_count == all.layer_bytes.size());
  CHECK(all.ring_slots == 0);
  const std::uint64_t total = std::accumulate(all.layer_bytes.begin(), all.layer_bytes.end(), std::uint64_t{0});
  for (double share : {0.2, 0.5, 0.8}) {
    auto x = in;
    x.trunk_gb = static_cast<double>(total) * share / 1e9;
    const auto p = k3::plan_memory(c, x);
    CAPTURE(share);
    CHECK(p.streams_trunk());
    CHECK(p.trunk_bytes() <= p.trunk_budget);
    check_pins(p);
  }
}

TEST_CASE("plan: the everything-fits budgets are resident, scaled budgets stream tiny") {
  const auto c = k3::load_geometry("tiny").config;
  k3::PlanInputs in;
  in.available = kPlenty;
  in.trunk_gb = 1000;
  in.expert_cache_gb = 1000;
  const auto resident = k3::plan_memory(c, in);
  CHECK(resident.resident());
  CHECK(resident.expert_slots == resident.experts_total);
  CHECK(resident.embedding_bytes == static_cast<std::uint64_t>(c.vocab_size * c.hidden_size * 2));

  in.trunk_gb = 0.00005;          // 50 kB
  in.expert_cache_gb = 0.000001;  // 1 kB: less than one slot
  const auto streamed = k3::plan_memory(c, in);
  CHECK(!streamed.resident());
  CHECK(streamed.streams_trunk());
  CHECK(streamed.streams_experts());
  CHECK(streamed.expert_slots == static_cast<std::uint64_t>(c.num_experts_per_token));  // raised to top-k
  CHECK(streamed.total < resident.total);
}

TEST_CASE("plan: fit sizes both budgets inside the available memory, trunk first") {
  const auto c = k3::load_geometry("demo").config;
  k3::PlanInputs in;  // both "fit"
  in.available = 200'000'000;
  const auto p = k3::plan_memory(c, in);
  CHECK(p.trunk_fit);
  CHECK(p.expert_fit);
  CHECK(p.fits());
  CHECK(p.total <= in.available);
  in.available = 100'000'000'000ull;
  const auto big = k3::plan_memory(c, in);
  CHECK(big.resident());
}

TEST_CASE("plan: a plan larger than the available memory is refused with exit 3") {
  const auto c = k3::load_geometry("tiny").config;
  k3::PlanInputs in;
  in.trunk_gb = 1;
  in.expert_cache_gb = 1;
  in.available = 1000;
  const auto p = k3::plan_memory(c, in);
  CHECK(!p.fits());
  try {
    k3::require_fit(p);
    FAIL("require_fit accepted a plan larger than the available memory");
  } catch (const k3::Error& e) {
    CHECK(e.code() == k3::ExitCode::resource);
    CHECK(std::string(e.what()).find("shortfall") != std::string::npos);
  }
}

TEST_CASE("available memory is measured and positive") {
  std::string from;
  const std::uint64_t a = k3::available_memory(&from);
  CHECK(a > 0);
  CHECK(!from.empty());
}

TEST_CASE(
    "plan: serve.parallel sequences each hold their state, KV and journals, 0 picks the most within a "
    "quarter, too many is exit 3 naming serve.parallel") {
  const k3::ModelConfig& c = geometry_config("k3");
  const k3::Pipeline p = k3::load_pipeline(kSrc / "presets" / "laptop.yaml",
                                           {"model.geometry=k3", "job.speculative.max_draft=4", "serve.parallel=1"});
  k3::PlanInputs in = k3::batched_plan_inputs(p);
  in.available = kPlenty;
  const auto one = k3::plan_memory(c, in);
  CHECK(one.parallel == 1);
  CHECK(!one.parallel_auto);
  CHECK(one.sequence_bytes == one.kda_state_bytes + one.mla_kv_bytes + one.speculative_bytes -
                                  static_cast<std::uint64_t>(1 + 4) * static_cast<std::uint64_t>(c.vocab_size) * 4);
  for (std::int64_t n : {2, 5}) {
    CAPTURE(n);
    in.parallel = n;
    const auto many = k3::plan_memory(c, in);
    const auto N = static_cast<std::uint64_t>(n);
    CHECK(many.parallel == static_cast<std::size_t>(n));
    CHECK(many.sequence_bytes == one.sequence_bytes);
    CHECK(many.kda_state_bytes == N * one.kda_state_bytes);
    CHECK(many.mla_kv_bytes == N * one.mla_kv_bytes);
    CHECK(many.total == sum_of_parts(many));
    // One pass holds every sequence's token and 4 drafts, or all but one beside the prefill budget.
    CHECK(many.step_rows == std::max<std::uint64_t>(N * 5, (N - 1) * 5 + many.prefill_budget));
    CHECK(static_cast<std::uint64_t>(many.buffers.chunk) == many.step_rows);
    CHECK(many.table().find(std::to_string(n) + " sequences decoded together") != std::string::npos);
  }
  // 0: the most, up to kAutoParallel, whose sequences take at most a quarter of the memory.
  in.parallel = 0;
  // Memory for 4x that many sequences and half of one: from 3 on, the laptop budgets fit beside.
  for (std::uint64_t sequences : {1u, 3u, 6u, 8u, 20u}) {
    CAPTURE(sequences);
    in.available = 4 * sequences * one.sequence_bytes + one.sequence_bytes / 2;
    const auto autop = k3::plan_memory(c, in);
    CHECK(autop.parallel_auto);
    const auto want = std::min<std::uint64_t>(sequences, static_cast<std::uint64_t>(k3::kAutoParallel));
    CHECK(autop.parallel == want);
    if (autop.parallel > 1) CHECK(autop.fits());
    CHECK(autop.parallel * autop.sequence_bytes <= std::max(autop.available / 4, autop.sequence_bytes));
  }
  // A number that does not fit is refused with exit 3, naming serve.parallel and the size of one.
  in.parallel = 64;
  in.available = 16'000'000'000ull;
  const auto big = k3::plan_memory(c, in);
  CHECK(!big.fits());
  try {
    k3::require_fit(big);
    FAIL("require_fit accepted 64 sequences of K3 in 16 GB");
  } catch (const k3::Error& e) {
    CHECK(e.code() == k3::ExitCode::resource);
    CHECK_THAT(e.what(), Catch::Contains("lower serve.parallel (64 sequences of"));
  }
  // The same budgets with one sequence fit: the slots are what did not.
  in.parallel = 1;
  CHECK(k3::plan_memory(c, in).fits());
}

TEST_CASE("plan: every compute thread has its own attention and recurrence scratch") {
  // Each thread running a (sequence, head) item of KDA or MLA (maths/parallel_items.hpp) has
  // u, alpha and bk of one KDA head, and qlat, cbar, the scores over the context and the
  // 8-way partition of one MLA head.
  const k3::ModelConfig& c = geometry_config("k3");
  k3::PlanInputs in;
  in.available = kPlenty;
  in.trunk_gb = 8;  // fixed budgets: the scratch is the only difference between the plans
  in.expert_cache_gb = 4;
  in.context = 8192;
  in.threads = 1;
  const k3::MemoryPlan one = k3::plan_memory(c, in);
  in.threads = 4;
  const k3::MemoryPlan four = k3::plan_memory(c, in);
  const auto D = static_cast<std::uint64_t>(c.kda_head_dim);
  const auto KVL = static_cast<std::uint64_t>(c.kv_lora_rank);
  const std::uint64_t lane = D * 4 + D * 8 * 2 + KVL * 4 * 2 + 8192 * 8 + 8 * KVL * 8;
  CHECK(four.buffer_bytes - one.buffer_bytes == 3 * lane);
  CHECK(four.total - one.total == 3 * lane);
}
