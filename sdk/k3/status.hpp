// k3host plugin SDK: the status every boundary function returns. No exception crosses
// the plugin boundary; a plugin catches and converts. \since ABI 1
#pragma once
#include <string>
#include <utility>

namespace k3::sdk {

enum class StatusCode : int {
  ok = 0,
  invalid_argument,  ///< a parameter or request the plugin refuses
  not_found,         ///< a file, key or token that does not exist
  io_error,          ///< the device or server failed (EIO, HTTP 5xx, ...)
  short_read,        ///< fewer bytes than asked for (truncated file, range past the end)
  unsupported,       ///< the platform cannot honour the request (never silently ignored)
  out_of_memory,
  internal,     ///< a broken invariant inside the plugin
  timed_out,    ///< the backend gave up within its own deadline, its retries included:
                ///< the host does not retry it \since ABI 4
  interrupted,  ///< abandoned because the host asked to stop (HostServices::stop_requested):
                ///< the host stops the run, it does not retry \since ABI 4
};

/// A coarse code plus one line of detail that says what and where
/// ("shard-00003.safetensors: short read at offset 123456: 4096 of 8192 bytes").
struct Status {
  StatusCode code = StatusCode::ok;
  std::string detail;

  [[nodiscard]] bool ok() const noexcept { return code == StatusCode::ok; }
  static Status success() { return {}; }
  static Status error(StatusCode c, std::string d) { return {c, std::move(d)}; }
};

inline const char* to_string(StatusCode c) noexcept {
  switch (c) {
    case StatusCode::ok: return "ok";
    case StatusCode::invalid_argument: return "invalid argument";
    case StatusCode::not_found: return "not found";
    case StatusCode::io_error: return "I/O error";
    case StatusCode::short_read: return "short read";
    case StatusCode::unsupported: return "unsupported";
    case StatusCode::out_of_memory: return "out of memory";
    case StatusCode::internal: return "internal error";
    case StatusCode::timed_out: return "timed out";
    case StatusCode::interrupted: return "interrupted";
  }
  return "unknown";
}

}  // namespace k3::sdk
