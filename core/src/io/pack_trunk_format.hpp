// Shared by the pack-trunk writer and the PackedTrunk reader: hex fingerprints, DType names,
// and XXH64 over a run read through a storage plugin.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <k3/checkpoint.hpp>
#include <k3/pack_trunk.hpp>
#include <k3/storage.hpp>

namespace k3::trunk_format {

inline constexpr std::string_view kFormat = "k3host-trunk";
inline constexpr int kVersion = 1;       ///< trunk.json of codec none
inline constexpr int kCodedVersion = 2;  ///< trunk.json with "codec" and coded layer runs
/// Bytes read per request while hashing or copying.
inline constexpr std::uint64_t kChunk = std::uint64_t{64} << 20;

std::string hex64(std::uint64_t v);
/// Parses 16 hex digits; false when malformed.
bool parse_hex64(std::string_view text, std::uint64_t& out);
/// DType from its safetensors name ("BF16", ...); false when unknown.
bool parse_dtype(std::string_view text, DType& out);

/// XXH64 (seed 0) of [offset, offset + length) of `file`, read in kChunk pieces; RuntimeError
/// naming `what` when a read fails. `progress(bytes)` is called after every piece.
std::uint64_t hash_range(sdk::StorageFile& file, const std::string& what, std::uint64_t offset, std::uint64_t length,
                         const std::function<void(std::uint64_t)>& progress = {});

/// XXH64 (seed 0) of coded run `run` of `file` as decoded (nbytes bytes: its tensors at
/// their offsets, zeros between), decoding one tensor at a time; RuntimeError naming `what`,
/// the run and the tensor when a stream does not decode.
std::uint64_t decoded_hash(sdk::StorageFile& file, const std::string& what, const PackedRun& run);

}  // namespace k3::trunk_format
