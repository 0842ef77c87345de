// The logging flags shared by the main job and every subcommand. They live on the top-level
// app; subcommands fall through to it, so `k3host make-model -v ...` works too.
#include <cstdlib>

#include <k3/log.hpp>
#include <k3/user_files.hpp>

#include "cli.hpp"

namespace k3::cli {

void add_log_options(CLI::App& app, GlobalOptions& global) {
  auto* level = app.add_option("--log-level", global.log.level,
                               "Log level: trace, debug, info (default), warn, error or off. Without a "
                               "flag, the K3_LOG_LEVEL environment variable sets it")
                    ->type_name("LEVEL");
  auto* verbose = app.add_flag("-v,--verbose", global.log.verbose, "More log lines: debug, twice (-vv) trace");
  auto* quiet = app.add_flag("-q,--quiet", global.log.quiet,
                             "Warnings and errors only; the main job also prints only the generated text");
  level->excludes(verbose)->excludes(quiet);
  verbose->excludes(quiet);
  app.add_option("--log-file", global.log_file,
                 "Also append the log to PATH, each line with its date and time (same level as the terminal)")
      ->type_name("PATH");
  app.add_flag("--log-timestamps", global.log_timestamps, "Put the date and time on the terminal's log lines too");
}

void start_logging(const GlobalOptions& global) {
  const ResolvedLogLevel resolved = resolve_log_level(global.log, std::getenv("K3_LOG_LEVEL"));
  set_log_level(resolved.level);
  set_log_timestamps(global.log_timestamps);
  // Appended to, never replaced, but a FIFO would hang and a device is not a log.
  if (!global.log_file.empty()) check_output_file(global.log_file, "--log-file");
  if (!global.log_file.empty()) set_log_file(global.log_file);
  log(LogLevel::debug, "",
      "log level " + std::string(log_level_name(resolved.level)) + " (from " + resolved.source + ")" +
          (global.log_file.empty() ? "" : ", also written to " + global.log_file));
}

}  // namespace k3::cli
