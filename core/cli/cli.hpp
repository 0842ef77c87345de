// The k3host command line: main.cpp owns the app and the exit-code mapping; each
// subcommand lives in its own cmd_<name>.cpp and registers itself here. CLI11 is included
// only by files in this folder (it is slow to compile).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <k3/log.hpp>
#include <k3/pipeline.hpp>

namespace k3::cli {

/// A flag that stands for one pipeline key (-n, -t, --prompt ...; pipeline_flags.cpp).
struct PipelineFlag {
  CLI::Option* option = nullptr;
  std::string value;
};

/// Options shared by the main job and every subcommand.
struct GlobalOptions {
  std::string config;              ///< --config FILE
  std::vector<std::string> sets;   ///< --set key=value, in order
  std::vector<PipelineFlag> flags; ///< -m -n -t -c --temp ... as typed
  /// What the pipeline gets from the command line: the flags, then every --set in order
  /// (pipeline_overrides(), filled in after parsing).
  std::vector<Override> overrides;
  LogRequest log;                  ///< --log-level, -v, -q
  std::string log_file;            ///< --log-file PATH
  bool log_timestamps = false;     ///< --log-timestamps
};

/// --log-level, -v, -q, --log-file, --log-timestamps (log_options.cpp).
void add_log_options(CLI::App& app, GlobalOptions& global);
/// Applies them (after parsing, before any work): the level from the flags, else
/// K3_LOG_LEVEL, else info; then the log file. A bad level or file is a UsageError.
void start_logging(const GlobalOptions& global);

/// A registered subcommand: run it when `app` was parsed. Returns the exit code.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

/// -m/--model, -n/--max-tokens, -t/--threads, -c/--context, --temp, --top-p, --seed,
/// -p/--prompt, -f/--file, --ids, --out, --save-state, --load-state, --dump-logits
/// (pipeline_flags.cpp).
void add_pipeline_flags(CLI::App& app, GlobalOptions& global);
/// The overrides they and --set make, flags first; an empty value is a UsageError.
std::vector<Override> pipeline_overrides(const GlobalOptions& global);


/// The load progress redraw on stderr ("[k3host] info: writing demo checkpoint:  42.0% (…)"), shown
/// when info lines are (LoadHooks::on_progress; run_job.cpp).
void show_load_progress(const std::string& what, std::uint64_t done, std::uint64_t total);

/// Each cmd_<name>.cpp defines one of these.
Command register_plugins(CLI::App& app, GlobalOptions& global);
Command register_tokenize(CLI::App& app, GlobalOptions& global);
Command register_make_model(CLI::App& app, GlobalOptions& global);
Command register_sim(CLI::App& app, GlobalOptions& global);
Command register_plan(CLI::App& app, GlobalOptions& global);
Command register_pack_trunk(CLI::App& app, GlobalOptions& global);
Command register_storage(CLI::App& app, GlobalOptions& global);
Command register_chat(CLI::App& app, GlobalOptions& global);
Command register_serve(CLI::App& app, GlobalOptions& global);
Command register_bench(CLI::App& app, GlobalOptions& global);
Command register_doctor(CLI::App& app, GlobalOptions& global);
Command register_perplexity(CLI::App& app, GlobalOptions& global);

/// First thing in main(): when the user set no OpenMP wait policy, sets k3host's and
/// re-executes the program once (openmp_reexec.cpp); returns only when it did not.
void apply_openmp_wait_policy(char** argv);
/// After logging starts: the policy in effect and who chose it, at debug level.
void log_openmp_wait_policy();

}  // namespace k3::cli
