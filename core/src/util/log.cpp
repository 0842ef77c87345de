#include <k3/log.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace k3 {
namespace {

LogLevel level_from_env() {
  const char* env = std::getenv("K3_LOG");
  if (env == nullptr) return LogLevel::info;
  const std::string v(env);
  if (v == "debug") return LogLevel::debug;
  if (v == "warn") return LogLevel::warn;
  if (v == "error") return LogLevel::error;
  return LogLevel::info;
}

std::atomic<int>& min_level() {
  static std::atomic<int> level{static_cast<int>(level_from_env())};
  return level;
}

const char* label(LogLevel level) {
  switch (level) {
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warn: return "warning";
    case LogLevel::error: return "error";
  }
  return "log";
}

}  // namespace

void set_log_level(LogLevel level) { min_level().store(static_cast<int>(level)); }

void log(LogLevel level, std::string_view component, std::string_view message) {
  if (static_cast<int>(level) < min_level().load()) return;
  // One fprintf per line so lines from several threads do not interleave.
  static std::mutex mutex;
  const std::lock_guard lock(mutex);
  std::fprintf(stderr, "[%.*s] %s: %.*s\n", static_cast<int>(component.size()), component.data(),
               label(level), static_cast<int>(message.size()), message.data());
}

}  // namespace k3
