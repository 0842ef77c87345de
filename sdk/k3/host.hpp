// k3host plugin SDK: what the host hands a plugin at creation.
//
// Plugin parameters arrive as a flat key -> string list (never a YAML node). A plugin
// describes them in a table and reads them through ParamReader with it (params.hpp), and
// reports the keys it did not read, so the host can fail with the pipeline file's line and
// column. Host services (logging, opening another storage backend for decorators, reading a
// small file through the pipeline's storage) come through HostServices; a plugin never
// reaches for host globals. \since ABI 1
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <k3/params.hpp>
#include <k3/status.hpp>

namespace k3::sdk {

class StorageBackend;

enum class LogLevel : int { debug = 0, info = 1, warn = 2, error = 3 };

/// Services the host provides. Lives at least as long as every plugin object.
/// Thread-safe: any plugin thread may call it.
class __attribute__((visibility("default"))) HostServices {
 public:
  virtual ~HostServices() = default;
  /// One log line; the host prefixes it with "[<kind>/<name>]". Per-item chatter: debug only.
  virtual void log(LogLevel level, std::string_view component, std::string_view message) noexcept = 0;
  /// Creates another storage backend by plugin name (for decorators such as throttle).
  /// The created backend is owned by the caller and must be destroyed before the caller is.
  virtual Status create_storage(std::string_view plugin, std::span<const Param> params,
                                std::unique_ptr<StorageBackend>& out) noexcept = 0;
  /// Replaces `out` with the whole file `uri`, read through the pipeline's storage backend
  /// (so a URI from the pipeline, e.g. a tokenizer's rank file next to the checkpoint, is
  /// reached the way the checkpoint is). A file larger than `max_bytes` is refused
  /// (invalid_argument, naming the URI, its size and the cap) before anything is read.
  /// Missing file: not_found; no backend to read through: unsupported. \since ABI 2
  virtual Status read_file(std::string_view uri, std::uint64_t max_bytes, std::string& out) noexcept = 0;
  /// True once the user asked the run to stop (Ctrl-C, SIGTERM) while the host is in a wait
  /// it can cut short. A plugin that may block for long (a storage backend waiting on a
  /// network) polls it and then abandons what it waits for, returning
  /// StatusCode::interrupted; one that never blocks for long may ignore it. Cheap (an
  /// atomic load); any thread. \since ABI 4
  [[nodiscard]] virtual bool stop_requested() const noexcept { return false; }
};

/// Everything a factory receives. The spans and the host outlive the call only;
/// copy what you keep (the host pointer itself stays valid for the plugin's lifetime).
struct CreateArgs {
  std::span<const Param> params;
  HostServices* host = nullptr;
};

}  // namespace k3::sdk
