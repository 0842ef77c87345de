#include "run_job.hpp"

#include <cstdio>
#include <filesystem>

#include <k3/error.hpp>
#include <k3/pipeline.hpp>

namespace k3::cli {

void add_run_options(CLI::App& app, RunOptions& run) {
  app.add_flag("--print-config", run.print_config, "Print the merged pipeline (after extends and --set) and exit");
  app.add_flag("--list-presets", run.list_presets, "List the memory presets (from the preset files) and exit");
  app.add_option("--presets-dir", run.presets_dir, "Folder of preset files for --list-presets (default ./presets)");
  app.add_flag("--print-schema", run.print_schema,
               "Print every pipeline key with its type, default and meaning (Markdown) and exit");
}

namespace {

std::filesystem::path presets_dir(const RunOptions& run) {
  if (!run.presets_dir.empty()) return run.presets_dir;
  if (std::filesystem::is_directory("presets")) return "presets";
  return std::filesystem::path(K3_SOURCE_DIR) / "presets";
}

}  // namespace

int run_job(const GlobalOptions& global, const RunOptions& run) {
  if (run.print_schema) {
    std::fputs(pipeline_schema_markdown().c_str(), stdout);
    return 0;
  }
  if (run.list_presets) {
    std::printf("%-12s %-9s %-9s %s\n", "PRESET", "TRUNK_GB", "CACHE_GB", "DESCRIPTION");
    for (const auto& p : list_presets(presets_dir(run)))
      std::printf("%-12s %-9s %-9s %s\n", p.name.c_str(), p.trunk_gb.c_str(), p.expert_cache_gb.c_str(),
                  p.description.c_str());
    return 0;
  }
  if (global.config.empty()) throw UsageError("no pipeline given: use --config FILE (e.g. presets/laptop.yaml)");
  const Pipeline pipeline = load_pipeline(global.config, global.sets);
  if (run.print_config) {
    std::fputs(pipeline.dump().c_str(), stdout);
    return 0;
  }
  throw UsageError("no model yet: the K3 forward pass is not built in this version, so the pipeline '" +
                   global.config + "' cannot run a job (use --print-config to check it)");
}

}  // namespace k3::cli
