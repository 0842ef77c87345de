// k3host plugin SDK: two optional capabilities of storage plugins, found by dynamic_cast.
// \since ABI 3 (additive: a plugin without them loads and works as before)
//
// StorageFileVersion, on a StorageFile: the version of the object the file was opened on,
// as its source reports it (for http, the ETag, else the Last-Modified date). A decorator
// that keeps bytes of a file beyond one read (the `tiered` disk cache) keys them by it, so
// bytes of one revision are never served for another revision of the same URI. Empty: the
// source gave none.
//
// StorageCounters, on a StorageBackend: the plugin's own counters (bytes from a local tier,
// blocks dropped as damaged and fetched again, ...), which the host copies into the run
// report (`storage_counters`) when the run ends. A decorator may include its inner backend's
// under its own names.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <k3/status.hpp>

namespace k3::sdk {

class __attribute__((visibility("default"))) StorageFileVersion {
 public:
  virtual ~StorageFileVersion() = default;
  /// The validator of the object as opened: fixed for the file's lifetime, any bytes; empty
  /// when the source gave none.
  [[nodiscard]] virtual std::string_view version() const noexcept = 0;
};

class __attribute__((visibility("default"))) StorageCounters {
 public:
  virtual ~StorageCounters() = default;
  /// Replaces `out` with (name, value) pairs, in an order that does not change between
  /// calls; names are lowercase words joined by '_'. May be called while reads run, from one
  /// host thread at a time. out_of_memory when `out` cannot grow.
  virtual Status counters(std::vector<std::pair<std::string, std::uint64_t>>& out) noexcept = 0;
};

}  // namespace k3::sdk
