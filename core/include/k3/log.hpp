// The one logger, owned by core and written through spdlog. Lines go to stderr (stdout is
// the job's output) and, when a log file is set, also to that file with a timestamp each.
// Every line has one form, "[WHO] LEVEL: MESSAGE", and says who wrote it: "[k3host] info:
// loading ..." for the host itself, "[serve] info: ..." for a part of it, "[storage/posix]
// debug: opened ..." for a plugin. Per-item chatter is debug level; per-step numbers go to
// the report, not the log.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>

#include <k3/host.hpp>

namespace k3 {

/// The SDK's four levels (a plugin's line keeps its level) plus trace below and off above.
enum class LogLevel : int { trace, debug, info, warn, error, off };

[[nodiscard]] LogLevel from_sdk(sdk::LogLevel level) noexcept;
[[nodiscard]] std::string_view log_level_name(LogLevel level) noexcept;

/// trace, debug, info, warn (or warning), error, off; any letter case. Anything else is a
/// UsageError "<where>: 'TEXT' is not a log level (trace, debug, info, warn, error or off)".
[[nodiscard]] LogLevel parse_log_level(std::string_view text, std::string_view where);

/// What the command line asked for; the CLI fills it from its flags.
struct LogRequest {
  std::string level;   ///< --log-level LEVEL (empty: not given)
  int verbose = 0;     ///< -v per occurrence: debug, then trace
  bool quiet = false;  ///< -q: warnings and errors only
};

struct ResolvedLogLevel {
  LogLevel level = LogLevel::info;
  std::string source;  ///< "--log-level", "-v", "-q", "K3_LOG_LEVEL" or "default"
};

/// The level in force: a flag beats K3_LOG_LEVEL (`env_value`; null or empty means unset),
/// which beats the default, info. --log-level, -v and -q are exclusive; given together the
/// first of that order wins (the CLI refuses the combination before this is called).
[[nodiscard]] ResolvedLogLevel resolve_log_level(const LogRequest& request, const char* env_value);

/// Sets the minimum level written (default info).
void set_log_level(LogLevel level) noexcept;
[[nodiscard]] LogLevel log_level() noexcept;
/// Whether a line of `level` would be written: callers skip building costly messages, and
/// terminal-only output (progress bars) follows the same switch.
[[nodiscard]] bool log_enabled(LogLevel level) noexcept;

/// Also appends every line that passes the level to `file`, each starting with the local
/// date and time to the millisecond. Missing parent folders are created. An empty path stops
/// writing to a file. Throws UsageError naming the file when it cannot be opened.
void set_log_file(const std::filesystem::path& file);
/// Timestamps on the terminal lines too (off by default: the terminal stays clean).
void set_log_timestamps(bool on);

/// The text of one line as the terminal shows it: "[COMPONENT] LEVEL: MESSAGE" (LEVEL is
/// "warning" for warn); an empty component is the host itself, "[k3host]".
[[nodiscard]] std::string format_log_line(LogLevel level, std::string_view component, std::string_view message);

/// The job's text on stdout is in the middle of a line (its last piece did not end in '\n').
/// While it is, a log line written where stdout also goes (the same terminal, pipe or file)
/// first ends that line on stderr, so the log line starts at the margin and the text is never
/// glued to it. The job says false again when its text ends a line itself.
void set_stdout_line_open(bool open) noexcept;
/// True when a log line ended the job's open line of text (see above) and no text came
/// after it: the job need not end that line again.
[[nodiscard]] bool stdout_line_ended_by_log() noexcept;

/// Writes one line (format_log_line) when `level` passes. Never throws: a line that cannot
/// be written is lost, not the run.
void log(LogLevel level, std::string_view component, std::string_view message) noexcept;
/// Writes a block of text (a table) as it is, one log line per line of it, with no "who"
/// prefix; filtered by `level` like any line, and timestamped in the log file.
void log_text(LogLevel level, std::string_view text) noexcept;
inline void log(sdk::LogLevel level, std::string_view component, std::string_view message) noexcept {
  log(from_sdk(level), component, message);
}

}  // namespace k3
