// k3host plan: prints the memory plan of a pipeline for its model geometry (no weights
// needed: `k3host plan --config presets/laptop.yaml --set model.geometry=k3` plans the full
// released model) and exits 3 when it does not fit in the available memory. With --ranks N
// it plans each rank of the model split over N ranks (docs/cluster.md) and what a decoded
// token makes each read and send.
#include <algorithm>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include <k3/checkpoint.hpp>
#include <k3/cluster.hpp>
#include <k3/error.hpp>
#include <k3/geometry.hpp>
#include <k3/model_config.hpp>
#include <k3/pipeline.hpp>
#include <k3/plan.hpp>
#include <k3/runtime.hpp>
#include <k3/units.hpp>

#include "cli.hpp"

namespace k3::cli {
namespace {

struct PlanArgs {
  bool from_checkpoint = false;
  double available_gb = 0;
  bool batched = false;
  int ranks = 0;
  bool json = false;
};

/// One rank's share of a model split over ranks, per decoded token of one sequence.
struct RankShare {
  LayerRange layers;
  MemoryPlan plan;
  std::size_t moe_layers = 0;
  std::uint64_t experts = 0;  ///< routed experts of its layers
  /// Expected routed-expert bytes read: each MoE layer's top-k drawn uniformly, a held
  /// expert hit with the chance slots / experts (an LRU under independent uniform picks).
  double expert_bytes_read = 0;
  std::uint64_t sent = 0;  ///< to the next rank (the last: the logits back to rank 0)
  /// The weight bytes a token multiplies here: its layers' trunk, top-k experts per MoE
  /// layer, the lm_head on the last rank (what its compute is proportional to).
  std::uint64_t touched = 0;
};

RankShare rank_share(const ModelConfig& config, const LayerRange& range, MemoryPlan plan) {
  RankShare r{range, std::move(plan)};
  for (std::size_t l = range.first; l < range.last; ++l)
    if (!config.is_dense(static_cast<std::int64_t>(l))) ++r.moe_layers;
  r.experts = r.moe_layers * static_cast<std::uint64_t>(config.num_experts);
  const double held =
      r.experts == 0 ? 1.0 : std::min(1.0, static_cast<double>(r.plan.expert_slots) / static_cast<double>(r.experts));
  r.expert_bytes_read = static_cast<double>(r.moe_layers) * static_cast<double>(config.num_experts_per_token) *
                        (1.0 - held) * static_cast<double>(r.plan.expert_slot_bytes);
  r.sent = cluster_pass_bytes(config, range.last, 1);
  r.touched = r.plan.pinned_bytes + r.plan.streamed_trunk_bytes +
              r.moe_layers * static_cast<std::uint64_t>(config.num_experts_per_token) * r.plan.expert_slot_bytes +
              (r.plan.holds_head() ? static_cast<std::uint64_t>(config.vocab_size * config.hidden_size) * 2 : 0);
  return r;
}

void print_ranks_json(const std::vector<RankShare>& shares, const ModelConfig& config, const std::string& what) {
  nlohmann::json j;
  j["model"] = what;
  j["layers"] = config.num_hidden_layers;
  j["ranks"] = nlohmann::json::array();
  for (std::size_t r = 0; r < shares.size(); ++r) {
    const RankShare& s = shares[r];
    j["ranks"].push_back({{"rank", r},
                          {"first_layer", s.layers.first},
                          {"last_layer", s.layers.last},
                          {"total_bytes", s.plan.total},
                          {"available_bytes", s.plan.available},
                          {"fits", s.plan.fits()},
                          {"pinned_layers", s.plan.pinned_count},
                          {"pinned_bytes", s.plan.pinned_bytes},
                          {"trunk_bytes_read", s.plan.streamed_trunk_bytes},
                          {"expert_slots", s.plan.expert_slots},
                          {"experts", s.experts},
                          {"expert_slot_bytes", s.plan.expert_slot_bytes},
                          {"expert_bytes_read", s.expert_bytes_read},
                          {"bytes_sent", s.sent},
                          {"bytes_touched", s.touched}});
  }
  std::printf("%s\n", j.dump(1).c_str());
}

void print_ranks_text(const std::vector<RankShare>& shares, const Pipeline& p, const std::string& what) {
  std::printf("plan for %s split over %zu ranks (cluster.layers %s), pipeline %s\n", what.c_str(), shares.size(),
              p.get_string("cluster.layers").c_str(), p.file().c_str());
  for (std::size_t r = 0; r < shares.size(); ++r) {
    std::printf("\nrank %zu:\n", r);
    std::fputs(shares[r].plan.table().c_str(), stdout);
  }
  std::printf("\nper decoded token of one sequence:\n%-5s %-8s %-10s %-14s %-11s %-18s %-15s %s\n", "rank", "layers",
              "plan", "pinned layers", "trunk read", "experts held", "experts read*", "sends");
  for (std::size_t r = 0; r < shares.size(); ++r) {
    const RankShare& s = shares[r];
    const std::string layers = std::to_string(s.layers.first) + "-" + std::to_string(s.layers.last - 1);
    const std::string pinned = std::to_string(s.plan.pinned_count) + "/" +
                               std::to_string(s.layers.last - s.layers.first);
    const std::string held = std::to_string(std::min(s.plan.expert_slots, s.experts)) + "/" + std::to_string(s.experts);
    std::printf("%-5zu %-8s %-10s %-14s %-11s %-18s %-15s %s%s\n", r, layers.c_str(),
                format_bytes(s.plan.total).c_str(), pinned.c_str(), format_bytes(s.plan.streamed_trunk_bytes).c_str(),
                held.c_str(), format_bytes(static_cast<std::uint64_t>(s.expert_bytes_read)).c_str(),
                format_bytes(s.sent).c_str(), r + 1 == shares.size() ? " (logits, to rank 0)" : "");
  }
  std::printf(
      "* expected, as if each MoE layer's top-k were drawn uniformly and independently (an LRU then hits\n"
      "  with the chance held/experts); real routing repeats experts, so it reads fewer\n");
}

/// --ranks N: every rank's plan (its layers, its own cluster.ranks.R overrides), then what
/// each holds, reads and sends per decoded token. Exit 3 when a rank's plan does not fit.
int plan_ranks(const Pipeline& p, const ModelConfig& config, const PlanArgs& args, bool batched,
               const std::string& what) {
  const std::vector<LayerRange> ranges = cluster_layer_ranges(p, config, args.ranks);
  std::vector<RankShare> shares;
  for (int r = 0; r < args.ranks; ++r) {
    const LayerRange range = ranges[static_cast<std::size_t>(r)];
    const Pipeline mine = p.for_rank(r);
    PlanInputs in = batched ? batched_plan_inputs(mine) : plan_inputs(mine);
    if (args.available_gb > 0) in.available = static_cast<std::uint64_t>(args.available_gb * 1e9);
    in.first_layer = range.first;
    in.last_layer = range.last;
    shares.push_back(rank_share(config, range, plan_memory(config, in)));
  }
  if (args.json)
    print_ranks_json(shares, config, what);
  else
    print_ranks_text(shares, p, what);
  std::fflush(stdout);
  // require_fit's message (the shortfall and what to lower), naming the rank.
  for (std::size_t r = 0; r < shares.size(); ++r) {
    try {
      require_fit(shares[r].plan);
    } catch (const Error& e) {
      throw Error(e.code(), "rank " + std::to_string(r) + ": " + e.what());
    }
  }
  return 0;
}

}  // namespace

Command register_plan(CLI::App& app, GlobalOptions& global) {
  auto args = std::make_shared<PlanArgs>();
  auto* sub = app.add_subcommand("plan",
                                 "Print the memory plan (pinned trunk, ring, expert slots, tables, state, KV, "
                                 "buffers) for the pipeline's model.geometry; exit 3 if it does not fit");
  sub->add_flag("--from-checkpoint", args->from_checkpoint,
                "Plan the checkpoint at model.path (its config.json) instead of model.geometry, and print its "
                "checkpoint identity (what packed trunks, state files and traces of it record)");
  sub->add_option("--available-gb", args->available_gb,
                  "Plan against this much available memory (GB) instead of measuring it");
  sub->add_flag("--batched", args->batched,
                "Plan serve.parallel sequences decoded together, as `serve` and `--prompts` run (with --parallel N, "
                "N of them; 0 = as many as fit)");
  sub->add_option("--ranks", args->ranks,
                  "Plan every rank of the model split over N ranks (cluster.layers, cluster.ranks.R.* overrides) "
                  "and what a decoded token makes each read and send (docs/cluster.md)")
      ->type_name("N")
      ->check(CLI::PositiveNumber);
  sub->add_flag("--json", args->json, "With --ranks: print the ranks' figures as JSON (tools/bench/cluster_model.py)");
  sub->footer(
      "A run of one prompt plans one sequence; `serve` and `--prompts` plan serve.parallel of them "
      "(--batched or --parallel N shows that plan). It writes nothing and reads no weights. Exit codes: 0 the plan "
      "fits, 2 a usage or configuration error, "
      "3 the plan does not fit.");
  return {sub, [args, &global]() {
            if (global.config.empty())
              throw UsageError("plan: no pipeline given: use --config PRESET or --config FILE (e.g. --config laptop)");
            const Pipeline p = load_pipeline(global.config, global.overrides);
            ModelConfig config;
            std::string what;
            if (args->from_checkpoint) {
              const std::string uri = p.get_path("model.path").string();
              PluginHost host(p.plugin_path());
              const auto storage = create_pipeline_storage(p, host);
              config = read_model_config(*storage, uri);
              const CheckpointIndex index = CheckpointIndex::open(*storage, uri);
              what = uri + " (checkpoint identity " + identity_hex(checkpoint_identity(config, index)) + ")";
            } else {
              const ModelGeometry g = load_geometry(p.get_string("model.geometry"));
              config = g.config;
              what = "geometry " + g.name + " (" + g.file.string() + ")";
            }
            // --parallel (which sets serve.parallel) plans a batched run too.
            const bool batched = args->batched || given_flag(global, "serve.parallel") != nullptr;
            if (args->json && args->ranks == 0) throw UsageError("plan: --json goes with --ranks N");
            if (args->ranks > 0) return plan_ranks(p, config, *args, batched, what);
            PlanInputs in = batched ? batched_plan_inputs(p) : plan_inputs(p);
            if (args->available_gb > 0) in.available = static_cast<std::uint64_t>(args->available_gb * 1e9);
            const MemoryPlan plan = plan_memory(config, in);
            std::printf("plan for %s, pipeline %s\n", what.c_str(), p.file().c_str());
            std::fputs(plan.table().c_str(), stdout);
            std::fflush(stdout);
            require_fit(plan);
            return 0;
          }};
}

}  // namespace k3::cli
