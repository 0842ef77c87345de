// k3host plugin SDK: storage backends — where checkpoint bytes come from. \since ABI 1
//
// A backend (one object per pipeline) opens files by URI: a path for local backends, a URL
// for http. Each open file is a StorageFile that reads batches of (offset, length, dest).
// Every byte of a checkpoint (config.json, the index json, shard headers and data, the
// tokenizer files) is read through the pipeline's backend: the host builds a file's URI by
// appending "/<name>" to model.path as a string, so a backend may serve URIs of any scheme.
// When model.path is an http:// or https:// URL the name is percent-encoded as one path
// segment (every byte but A-Z a-z 0-9 - . _ ~); a shard name is a plain file name (no '/',
// '\\', '%', control character, "." or "..": the host refuses others). \since ABI 4
//
// Contract
// - Any request is valid: alignment() is a preference (e.g. 4096 for O_DIRECT); a backend
//   that needs aligned I/O bounces unaligned requests itself. The host aligns destination
//   buffers and request boundaries to alignment() where it can, to enable zero-copy.
// - read() reads every request of the batch fully, in any order, and returns the first
//   failure; each request's `result` says which ones failed. A request past the end of the
//   file, or a truncated file, is StatusCode::short_read with offset and byte counts in the
//   detail; a device error is io_error. Destinations are owned by the host.
// - The host retries a failed read (a few attempts), except timed_out (the backend already
//   retried within its deadline) and interrupted (the run is stopping: a backend that may
//   wait long polls HostServices::stop_requested() and abandons its waits). \since ABI 4
// - Thread-safety: a StorageFile may be read from several host threads at once.
//   open() and list() are called from one thread at a time.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <k3/status.hpp>

namespace k3::sdk {

struct ReadRequest {
  std::uint64_t offset = 0;            ///< byte offset in the file
  std::uint64_t length = 0;            ///< bytes to read
  std::byte* dest = nullptr;           ///< host-owned, at least `length` bytes
  StatusCode result = StatusCode::ok;  ///< out: this request's outcome
};

class __attribute__((visibility("default"))) StorageFile {
 public:
  virtual ~StorageFile() = default;
  /// File size in bytes, known at open.
  [[nodiscard]] virtual std::uint64_t size() const noexcept = 0;
  /// Preferred alignment of offsets, lengths and destinations (1 = none).
  [[nodiscard]] virtual std::uint32_t alignment() const noexcept = 0;
  /// Reads the batch; see the contract above.
  virtual Status read(std::span<ReadRequest> batch) noexcept = 0;
};

class __attribute__((visibility("default"))) StorageBackend {
 public:
  virtual ~StorageBackend() = default;
  /// Opens `uri` for reading. Missing file: not_found; permission or device: io_error.
  virtual Status open(std::string_view uri, std::unique_ptr<StorageFile>& out) noexcept = 0;
  /// Replaces `names` with the names (not paths) of the regular files directly inside the
  /// folder `uri`, in any order. Missing folder: not_found. A backend that cannot list (a
  /// plain http server) returns unsupported: the host then requires
  /// model.safetensors.index.json, which names the shards. Decorators forward. \since ABI 2
  virtual Status list(std::string_view uri, std::vector<std::string>& names) noexcept = 0;
};

}  // namespace k3::sdk
