// k3host plan: prints the memory plan of a pipeline for its model geometry (no weights
// needed: `k3host plan --config presets/laptop.yaml --set model.geometry=k3` plans the full
// released model) and exits 3 when it does not fit in the available memory.
#include <cstdio>
#include <memory>

#include <k3/checkpoint.hpp>
#include <k3/error.hpp>
#include <k3/geometry.hpp>
#include <k3/model_config.hpp>
#include <k3/pipeline.hpp>
#include <k3/plan.hpp>
#include <k3/runtime.hpp>

#include "cli.hpp"

namespace k3::cli {
namespace {

struct PlanArgs {
  bool from_checkpoint = false;
  double available_gb = 0;
  bool batched = false;
};

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
