// The main job: k3host --config PIPELINE [--set k=v]... runs the pipeline's job. Its prompt,
// length and sampling flags (-p, -n, --temp ...) are pipeline flags (pipeline_flags.cpp).
#pragma once
#include <string>

#include "cli.hpp"

namespace k3::cli {

struct RunOptions {
  bool print_config = false;   ///< --print-config: print the merged pipeline, run nothing
  bool list_presets = false;   ///< --list-presets: list presets/*.yaml, run nothing
  bool print_schema = false;   ///< --print-schema: print every pipeline key (Markdown), run nothing
  std::string presets_dir;     ///< --presets-dir (default: ./presets, else the installed ones)
  bool version = false;        ///< --version: version, commit, compiler, kernel sets; run nothing
};

void add_run_options(CLI::App& app, RunOptions& run);
int run_job(const GlobalOptions& global, const RunOptions& run);
/// job.prompts set: every prompt of the file, generated together (run_prompts.cpp).
int run_prompts_file(const Pipeline& pipeline);

}  // namespace k3::cli
