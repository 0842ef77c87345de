// k3host plugin SDK: what the host hands a plugin at creation.
//
// Plugin parameters arrive as a flat key -> string list (never a YAML node). A plugin reads
// them through ParamReader and reports the keys it did not recognise, so the host can fail
// with the pipeline file's line and column. Host services (logging, opening another
// storage backend for decorators, reading a small file through the pipeline's storage)
// come through HostServices; a plugin never reaches for host globals. \since ABI 1
#pragma once
#include <charconv>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <k3/status.hpp>

namespace k3::sdk {

class StorageBackend;

struct Param {
  std::string_view key;
  std::string_view value;
};

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
};

/// Everything a factory receives. The spans and the host outlive the call only;
/// copy what you keep (the host pointer itself stays valid for the plugin's lifetime).
struct CreateArgs {
  std::span<const Param> params;
  HostServices* host = nullptr;
};

/// Reads typed parameters and remembers which keys were used, so the factory can report
/// the rest as unknown. Header-only so plugins share one parser.
class ParamReader {
 public:
  explicit ParamReader(std::span<const Param> params) : params_(params), used_(params.size(), false) {}

  [[nodiscard]] bool has(std::string_view key) const noexcept { return find(key) >= 0; }

  std::string get_string(std::string_view key, std::string_view fallback) {
    const long i = mark(key);
    return std::string(i >= 0 ? params_[static_cast<std::size_t>(i)].value : fallback);
  }

  /// Integer parameter; `ok` is false (and an error detail set) if present but malformed.
  template <class Int>
  Int get_int(std::string_view key, Int fallback, Status& status) {
    const long i = mark(key);
    if (i < 0) return fallback;
    const std::string_view v = params_[static_cast<std::size_t>(i)].value;
    Int out{};
    const auto res = std::from_chars(v.data(), v.data() + v.size(), out);
    if (res.ec != std::errc{} || res.ptr != v.data() + v.size()) {
      status = Status::error(StatusCode::invalid_argument,
                             std::string(key) + ": expected an integer, got '" + std::string(v) + "'");
      return fallback;
    }
    return out;
  }

  double get_double(std::string_view key, double fallback, Status& status) {
    const long i = mark(key);
    if (i < 0) return fallback;
    const std::string v(params_[static_cast<std::size_t>(i)].value);
    try {
      std::size_t pos = 0;
      const double d = std::stod(v, &pos);
      if (pos == v.size()) return d;
    } catch (...) {
    }
    status = Status::error(StatusCode::invalid_argument,
                           std::string(key) + ": expected a number, got '" + v + "'");
    return fallback;
  }

  bool get_bool(std::string_view key, bool fallback, Status& status) {
    const long i = mark(key);
    if (i < 0) return fallback;
    const std::string_view v = params_[static_cast<std::size_t>(i)].value;
    if (v == "true" || v == "1" || v == "yes" || v == "on") return true;
    if (v == "false" || v == "0" || v == "no" || v == "off") return false;
    status = Status::error(StatusCode::invalid_argument,
                           std::string(key) + ": expected true or false, got '" + std::string(v) + "'");
    return fallback;
  }

  /// Parameters whose keys were never read; the factory returns them as unknown.
  [[nodiscard]] std::vector<std::string> unused() const {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (!used_[i]) out.emplace_back(params_[i].key);
    return out;
  }

 private:
  long find(std::string_view key) const noexcept {
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i].key == key) return static_cast<long>(i);
    return -1;
  }
  long mark(std::string_view key) {
    const long i = find(key);
    if (i >= 0) used_[static_cast<std::size_t>(i)] = true;
    return i;
  }
  std::span<const Param> params_;
  std::vector<bool> used_;
};

}  // namespace k3::sdk
