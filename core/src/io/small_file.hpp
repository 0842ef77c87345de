// Reading checkpoint files through the pipeline's storage backend: core never opens a
// checkpoint file itself, so the same code reads a local folder and (with an http backend)
// a URL. Small files (config.json, the index json, tokenizer files, shard headers) are read
// whole into a buffer padded for simdjson, with a size cap so that a wrong file (a shard
// where config.json should be) is refused before it is read.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <simdjson.h>

#include <k3/storage.hpp>

namespace k3::io {

/// Caps for the small files of a checkpoint; each is far above what a real one holds
/// (the full K3's index json is ~40 MB, its tiktoken.model ~3 MB).
inline constexpr std::uint64_t kMaxConfigJson = std::uint64_t{16} << 20;
inline constexpr std::uint64_t kMaxIndexJson = std::uint64_t{512} << 20;
inline constexpr std::uint64_t kMaxTokenizerFile = std::uint64_t{256} << 20;

/// Opens `uri` through `storage`. Missing: nullptr when `missing_ok`, else UsageError
/// "<uri>: <what> not found (read through storage plugin)"; other failures: RuntimeError
/// naming the URI and the plugin's detail.
std::unique_ptr<sdk::StorageFile> open_file(sdk::StorageBackend& storage, const std::string& uri, std::string_view what,
                                            bool missing_ok = false);

/// Reads exactly [offset, offset + length) of `file` into `dest`, retrying a failed read
/// (3 attempts, as weight reads); RuntimeError naming `uri` and the plugin's detail.
void read_exact(sdk::StorageFile& file, std::uint64_t offset, std::uint64_t length, void* dest, const std::string& uri);

/// The whole of an open file, at most `max_bytes` (UsageError naming the URI, its size and
/// the cap).
simdjson::padded_string read_whole(sdk::StorageFile& file, const std::string& uri, std::uint64_t max_bytes);

/// Opens and reads the whole file, at most `max_bytes` (UsageError naming the URI, its size and the cap).
simdjson::padded_string read_small_file(sdk::StorageBackend& storage, const std::string& uri, std::uint64_t max_bytes,
                                        std::string_view what);

/// The same without exceptions, for HostServices::read_file: not_found, invalid_argument
/// (too large), or the plugin's status; `out` holds the file on success.
sdk::Status try_read_small_file(sdk::StorageBackend& storage, std::string_view uri, std::uint64_t max_bytes,
                                std::string& out) noexcept;

}  // namespace k3::io
