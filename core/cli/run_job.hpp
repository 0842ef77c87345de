// The main job: k3host --config PIPELINE [--set k=v]... runs the pipeline's job.
#pragma once
#include <string>

#include "cli.hpp"

namespace k3::cli {

struct RunOptions {
  bool print_config = false;   ///< --print-config: print the merged pipeline, run nothing
  bool list_presets = false;   ///< --list-presets: list presets/*.yaml, run nothing
  bool print_schema = false;   ///< --print-schema: print every pipeline key (Markdown), run nothing
  std::string presets_dir;     ///< --presets-dir (default: ./presets, else the installed ones)
  // Job shortcuts: each becomes a --set override of the job section.
  std::string ids;             ///< --ids 1,2,3        → job.ids
  std::string prompt;          ///< --prompt TEXT      → job.prompt
  std::string prompt_file;     ///< --prompt-file F    → job.prompt_file
  std::string out;             ///< --out FILE         → job.report
  std::string save_state;      ///< --save-state FILE  → job.save_state
  std::string load_state;      ///< --load-state FILE  → job.load_state
  std::string dump_logits;     ///< --dump-logits FILE → job.dump_logits
};

void add_run_options(CLI::App& app, RunOptions& run);
int run_job(const GlobalOptions& global, const RunOptions& run);

}  // namespace k3::cli
