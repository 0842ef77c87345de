// The one logger, owned by core. Lines go to stderr and start with their component,
// "[storage/posix] ...". Per-item chatter is debug level; per-step numbers go to the
// report, not the log.
#pragma once
#include <string_view>

#include <k3/host.hpp>

namespace k3 {

using LogLevel = sdk::LogLevel;

/// Sets the minimum level printed (default info; K3_LOG=debug|info|warn|error overrides).
void set_log_level(LogLevel level);
void log(LogLevel level, std::string_view component, std::string_view message);

}  // namespace k3
