// The logger behind k3/log.hpp: one spdlog logger with a stderr sink and, on request, a file
// sink. This file formats the line itself (who wrote it, its level), so both sinks show the
// same text and the file's pattern only adds the timestamp. It also keeps a log line from
// being glued to the job's text when stdout and stderr share a terminal.
#include <k3/log.hpp>

#include <spdlog/logger.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include <k3/error.hpp>
#include <k3/user_files.hpp>
#include "util/ascii.hpp"

namespace k3 {
namespace {

constexpr const char* kPlainPattern = "%v";
constexpr const char* kStampedPattern = "%Y-%m-%d %H:%M:%S.%e %v";

std::atomic<int>& min_level() {
  static std::atomic<int> level{static_cast<int>(LogLevel::info)};
  return level;
}

// Reconfiguring builds a new logger and swaps it in under the mutex; a line being written
// holds its own reference, so it never sees a sink list that is changing.
struct LoggerState {
  std::mutex mutex;
  std::shared_ptr<spdlog::sinks::sink> terminal;
  std::shared_ptr<spdlog::sinks::sink> file;
  std::shared_ptr<spdlog::logger> logger;

  LoggerState() : terminal(std::make_shared<spdlog::sinks::stderr_sink_mt>()) {
    terminal->set_pattern(kPlainPattern);
    rebuild();
  }
  void rebuild() {
    std::vector<spdlog::sink_ptr> sinks{terminal};
    if (file) sinks.push_back(file);
    auto next = std::make_shared<spdlog::logger>("k3", sinks.begin(), sinks.end());
    next->set_level(spdlog::level::trace);  // the level test is ours (min_level)
    next->flush_on(spdlog::level::trace);   // a file line is on disk before the next one starts
    logger = std::move(next);
  }
};

LoggerState& state() {
  static LoggerState s;
  return s;
}

spdlog::level::level_enum to_spdlog(LogLevel level) {
  switch (level) {
    case LogLevel::trace: return spdlog::level::trace;
    case LogLevel::debug: return spdlog::level::debug;
    case LogLevel::info: return spdlog::level::info;
    case LogLevel::warn: return spdlog::level::warn;
    case LogLevel::error: return spdlog::level::err;
    case LogLevel::off: return spdlog::level::off;
  }
  return spdlog::level::info;
}


}  // namespace

LogLevel from_sdk(sdk::LogLevel level) noexcept {
  switch (level) {
    case sdk::LogLevel::debug: return LogLevel::debug;
    case sdk::LogLevel::info: return LogLevel::info;
    case sdk::LogLevel::warn: return LogLevel::warn;
    case sdk::LogLevel::error: return LogLevel::error;
  }
  return LogLevel::error;  // a value the SDK does not define: show it rather than lose it
}

std::string_view log_level_name(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::trace: return "trace";
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warn: return "warn";
    case LogLevel::error: return "error";
    case LogLevel::off: return "off";
  }
  return "?";
}

LogLevel parse_log_level(std::string_view text, std::string_view where) {
  const std::string v = util::ascii_lower(text);
  for (const LogLevel l :
       {LogLevel::trace, LogLevel::debug, LogLevel::info, LogLevel::warn, LogLevel::error, LogLevel::off})
    if (v == log_level_name(l)) return l;
  if (v == "warning") return LogLevel::warn;
  throw UsageError(std::string(where) + ": '" + std::string(text) +
                   "' is not a log level (trace, debug, info, warn, error or off)");
}

ResolvedLogLevel resolve_log_level(const LogRequest& request, const char* env_value) {
  if (!request.level.empty()) return {parse_log_level(request.level, "--log-level"), "--log-level"};
  if (request.verbose > 0) return {request.verbose == 1 ? LogLevel::debug : LogLevel::trace, "-v"};
  if (request.quiet) return {LogLevel::warn, "-q"};
  if (env_value != nullptr && *env_value != '\0') return {parse_log_level(env_value, "K3_LOG_LEVEL"), "K3_LOG_LEVEL"};
  return {LogLevel::info, "default"};
}

void set_log_level(LogLevel level) noexcept { min_level().store(static_cast<int>(level)); }

LogLevel log_level() noexcept { return static_cast<LogLevel>(min_level().load()); }

bool log_enabled(LogLevel level) noexcept {
  return level != LogLevel::off && static_cast<int>(level) >= min_level().load();
}

void set_log_file(const std::filesystem::path& file) {
  LoggerState& s = state();
  std::shared_ptr<spdlog::sinks::sink> sink;
  if (!file.empty()) {
    check_output_file(file, {});  // a FIFO would hang the open, a device is no log
    try {
      sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file.string(), /*truncate=*/false);
    } catch (const spdlog::spdlog_ex& e) {
      throw UsageError(file.string() + ": cannot open the log file: " + e.what());
    }
    sink->set_pattern(kStampedPattern);
  }
  const std::lock_guard lock(s.mutex);
  s.file = std::move(sink);
  s.rebuild();
}

void set_log_timestamps(bool on) {
  LoggerState& s = state();
  const std::lock_guard lock(s.mutex);
  s.terminal->set_pattern(on ? kStampedPattern : kPlainPattern);
}

std::string format_log_line(LogLevel level, std::string_view component, std::string_view message) {
  const std::string_view label = level == LogLevel::warn ? "warning" : log_level_name(level);
  const std::string_view who = component.empty() ? std::string_view("k3host") : component;
  std::string line;
  line.reserve(who.size() + message.size() + 20);
  line.append("[").append(who).append("] ").append(label).append(": ");
  line += message;
  return line;
}

namespace {

// What the job's stdout ends with (set_stdout_line_open): its text's line is closed, open,
// or was closed by a log line.
enum StdoutLine : int { kClosed, kOpen, kEndedByLog };
std::atomic<int> g_stdout_line{kClosed};

/// Whether stdout and stderr write to the same place (one terminal, pipe or file), where a
/// log line would otherwise continue the job's open line of text.
bool stdout_shares_stderr() {
  struct stat out {
  }, err{};
  if (::fstat(STDOUT_FILENO, &out) != 0 || ::fstat(STDERR_FILENO, &err) != 0) return false;
  return out.st_dev == err.st_dev && out.st_ino == err.st_ino;
}

void write_line(LogLevel level, std::string_view line) {
  std::shared_ptr<spdlog::logger> logger;
  {
    LoggerState& s = state();
    const std::lock_guard lock(s.mutex);
    logger = s.logger;
    // The terminal's line must start at the margin: end the job's open line of text first
    // (on stderr only: the log file never saw that text).
    int open = kOpen;
    if (g_stdout_line.load() == kOpen && stdout_shares_stderr() &&
        g_stdout_line.compare_exchange_strong(open, kEndedByLog)) {
      std::fflush(stdout);
      std::fputc('\n', stderr);
    }
  }
  // The sinks serialise whole lines, so lines from several threads never interleave.
  logger->log(to_spdlog(level), spdlog::string_view_t(line.data(), line.size()));
}

}  // namespace

void set_stdout_line_open(bool open) noexcept { g_stdout_line.store(open ? kOpen : kClosed); }

bool stdout_line_ended_by_log() noexcept { return g_stdout_line.load() == kEndedByLog; }

void log(LogLevel level, std::string_view component, std::string_view message) noexcept {
  if (!log_enabled(level)) return;
  try {
    write_line(level, format_log_line(level, component, message));
  } catch (...) {
    // Logging must never take the run down; a lost line is the lesser harm.
  }
}

void log_text(LogLevel level, std::string_view text) noexcept {
  if (!log_enabled(level)) return;
  try {
    while (!text.empty()) {
      const std::size_t end = std::min(text.find('\n'), text.size());
      write_line(level, text.substr(0, end));
      text.remove_prefix(std::min(end + 1, text.size()));
    }
  } catch (...) {
    // As above.
  }
}

}  // namespace k3
