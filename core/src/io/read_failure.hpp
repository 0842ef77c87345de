// What the host does with a storage read that failed (sdk/k3/storage.hpp, "Contract"): it
// reads a failure again a few times, except one the backend already retried up to its own
// deadline (timed_out) or abandoned because the run is stopping (interrupted); and a failure
// it gives up on ends the work as k3::Interrupted (exit 5) when the backend abandoned the
// read on a stop request, else as a RuntimeError (exit 1). Every reader of checkpoint bytes
// goes through these two, so a stop request or a deadline means the same everywhere.
#pragma once
#include <string>

#include <k3/error.hpp>
#include <k3/status.hpp>

namespace k3::io {

/// Whether the host reads a request that failed with `code` again.
[[nodiscard]] inline bool worth_retrying(sdk::StatusCode code) noexcept {
  return code != sdk::StatusCode::timed_out && code != sdk::StatusCode::interrupted;
}

/// Throws for a read that failed with `code`; `message` says what and where.
[[noreturn]] inline void throw_read_failure(sdk::StatusCode code, const std::string& message) {
  if (code == sdk::StatusCode::interrupted) throw Interrupted(message);
  throw RuntimeError(message);
}

}  // namespace k3::io
