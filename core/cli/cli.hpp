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

namespace k3::cli {

/// Options shared by the main job and every subcommand.
struct GlobalOptions {
  std::string config;              ///< --config FILE
  std::vector<std::string> sets;   ///< --set key=value, in order
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

/// Each cmd_<name>.cpp defines one of these.
/// Bytes for people: "12.3 MiB" below 1 GiB, "1.23 GiB" from there (binary units, labelled).
std::string human_bytes(std::uint64_t bytes);

Command register_plugins(CLI::App& app, GlobalOptions& global);
Command register_tokenize(CLI::App& app, GlobalOptions& global);
Command register_make_model(CLI::App& app, GlobalOptions& global);
Command register_sim(CLI::App& app, GlobalOptions& global);
Command register_plan(CLI::App& app, GlobalOptions& global);
Command register_pack_trunk(CLI::App& app, GlobalOptions& global);
Command register_storage(CLI::App& app, GlobalOptions& global);
Command register_chat(CLI::App& app, GlobalOptions& global);
Command register_serve(CLI::App& app, GlobalOptions& global);
Command register_doctor(CLI::App& app, GlobalOptions& global);

/// First thing in main(): when the user set no OpenMP wait policy, sets k3host's and
/// re-executes the program once (openmp_reexec.cpp); returns only when it did not.
void apply_openmp_wait_policy(char** argv);
/// After logging starts: the policy in effect and who chose it, at debug level.
void log_openmp_wait_policy();

}  // namespace k3::cli
