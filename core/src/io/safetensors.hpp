// The safetensors container, read side (https://github.com/huggingface/safetensors; the
// writer is synth/safetensors_write.hpp):
//   [u64 little-endian header length N][N bytes of JSON header][data]
// header: {"__metadata__": {...}?, "<name>": {"dtype": "BF16", "shape": [..],
//          "data_offsets": [begin, end]}, ...}, offsets relative to the data start 8 + N.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <k3/checkpoint.hpp>
#include <k3/storage.hpp>

namespace k3::io {

/// A header longer than this is refused as implausible (a full K3 shard's is ~0.8 MB).
inline constexpr std::uint64_t kMaxSafetensorsHeader = std::uint64_t{1} << 30;

/// "BF16" → DType; nullopt for a dtype we cannot hold.
std::optional<DType> parse_safetensors_dtype(std::string_view s) noexcept;

/// Reads and validates one shard's header through the storage plugin (`file` is the shard
/// at `uri`, two reads: the length, then the JSON into `buffer`, which is grown as needed
/// and may be reused across calls). Tensors get `file = file_index` and absolute offsets. Checks: header length inside
/// the file, valid JSON object, known dtype, shape × element size == span, span inside the file, no two spans
/// overlapping. UsageError
/// "<file>: tensor '<name>': <what>" (or "<file>: <what>" for the container).
/// Appends the shard's tensors to `out`; returns the header JSON's length (it is in
/// `buffer[0, length)`).
std::uint64_t read_safetensors_header(sdk::StorageFile& file, const std::string& uri, std::uint32_t file_index,
                                      std::vector<char>& buffer, std::vector<TensorInfo>& out);

}  // namespace k3::io
