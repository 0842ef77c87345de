// Errors inside libk3core are exceptions carrying the exit code the CLI will use
// (docs/architecture.md, "Library first, and the CLI contract"). The message says what and where, on one line.
#pragma once
#include <stdexcept>
#include <string>

namespace k3 {

enum class ExitCode : int {
  ok = 0,
  runtime = 1,         ///< a runtime failure (I/O died mid-run, internal error)
  usage = 2,           ///< usage or configuration error; nothing ran
  resource = 3,        ///< the plan does not fit in memory; nothing ran
  expert_failure = 4,  ///< finished, but a routed expert failed to load: ids are unsound
  interrupted = 5,     ///< stopped by Ctrl-C after writing state and report
  warnings = 6,        ///< `k3host doctor` only: finished, found warnings but no error
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  [[nodiscard]] ExitCode code() const noexcept { return code_; }

 private:
  ExitCode code_;
};

/// Configuration / usage error (exit 2).
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(ExitCode::usage, message) {}
};

/// Runtime failure (exit 1).
class RuntimeError : public Error {
 public:
  explicit RuntimeError(const std::string& message) : Error(ExitCode::runtime, message) {}
};

/// A wait cut short because the user asked the run to stop (exit 5): a storage read the
/// plugin abandoned (sdk::StatusCode::interrupted). generate() turns it into an interrupted
/// result whose forward pass was cut (docs/architecture.md, "Stopping a run").
class Interrupted : public Error {
 public:
  explicit Interrupted(const std::string& message) : Error(ExitCode::interrupted, message) {}
};

}  // namespace k3
