// The k3host command line: main.cpp owns the app and the exit-code mapping; each
// subcommand lives in its own cmd_<name>.cpp and registers itself here. CLI11 is included
// only by files in this folder (it is slow to compile).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
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
  std::string config;               ///< --config FILE
  std::vector<std::string> sets;    ///< --set key=value, in order
  std::vector<PipelineFlag> flags;  ///< -m -n -t -c --temp ... as typed
  /// What the pipeline gets from the command line: the flags, then every --set in order
  /// (pipeline_overrides(), filled in after parsing).
  std::vector<Override> overrides;
  LogRequest log;               ///< --log-level, -v, -q
  std::string log_file;         ///< --log-file PATH
  bool log_timestamps = false;  ///< --log-timestamps
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

/// -m/--model, -p/--prompt, -f/--file, --ids, -n/--max-tokens, -t/--threads, -c/--context,
/// -b/--batch-size, --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n,
/// -s/--seed, --ignore-eos, --model-draft, --draft-max, --draft-p-min, --out, --save-state,
/// --load-state, --dump-logits, with llama.cpp's names as aliases (pipeline_flags.cpp).
void add_pipeline_flags(CLI::App& app, GlobalOptions& global);
/// The overrides they and --set make, flags first; an empty value is a UsageError.
std::vector<Override> pipeline_overrides(const GlobalOptions& global);
/// The flag that stands for `key` when it was given on the command line, else null.
const PipelineFlag* given_flag(const GlobalOptions& global, std::string_view key);
/// Token ids written "1,2,3", "1 2 3" or both ways, as words: {"1", "2", "3"}.
std::vector<std::string> split_ids(const std::string& text);

/// Other engines' habits that are not pipeline keys (habit_flags.cpp): -i/-cnv/--conversation
/// starts `chat`; --no-conversation, --no-warmup and -ngl/--n-gpu-layers are accepted and
/// change nothing (the last says so: there is no GPU).
struct HabitFlags {
  bool conversation = false;
  bool no_conversation = false;
  bool no_warmup = false;
  CLI::Option* gpu_layers = nullptr;
  std::string gpu_layers_value;
};
void add_habit_flags(CLI::App& app, HabitFlags& habits);
/// After logging starts: the one-line notes of the flags that change nothing.
void note_habit_flags(const HabitFlags& habits);
/// The command line as CLI11 should parse it, checked first: a single-dash flag of several
/// letters is one flag, never a short flag with its value glued on (-cnv is not -c nv, -ngl 99
/// is not -n gl 99); the multi-letter flags of other engines that mean something here become
/// their long names (-cnv --conversation, -ngl --n-gpu-layers, -md --model-draft); any other
/// such flag, an unknown long flag, and the other engines' flags that mean nothing here are a
/// UsageError that names the flag whole (with why, or the closest flag k3host has).
std::vector<std::string> check_command_line(const CLI::App& app, int argc, const char* const* argv);


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
