// Shared by the pack-trunk writer and the PackedTrunk reader: hex checksums, DType names,
// XXH3-64 over a run read through a storage plugin, and the check of a whole run (its
// stored bytes, each tensor as decoded, each row against the row table).
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <k3/checkpoint.hpp>
#include <k3/packed_trunk.hpp>
#include <k3/storage.hpp>

namespace k3::io::trunk_format {

inline constexpr std::string_view kFormat = "k3host-trunk";
/// The one version this build writes and reads: XXH3-64 per run, per tensor and per row of
/// the tensors read in pieces, and the checkpoint identity (k3/packed_trunk.hpp).
inline constexpr int kVersion = 3;
/// Bytes read per request while hashing or copying.
inline constexpr std::uint64_t kChunk = std::uint64_t{64} << 20;

std::string hex64(std::uint64_t v);
/// Parses 16 hex digits; false when malformed.
bool parse_hex64(std::string_view text, std::uint64_t& out);
/// DType from its safetensors name ("BF16", ...); false when unknown.
bool parse_dtype(std::string_view text, DType& out);

/// XXH3-64 (seed 0) of [offset, offset + length) of `file`, read in kChunk pieces; RuntimeError
/// naming `what` when a read fails. `progress(bytes)` is called after every piece.
std::uint64_t hash_range(sdk::StorageFile& file, const std::string& what, std::uint64_t offset, std::uint64_t length,
                         const std::function<void(std::uint64_t)>& progress = {});

/// XXH3-64 of tensor `t` of coded run `run` of `file` as decoded; RuntimeError naming `what`,
/// the run and the tensor when its stream does not decode.
std::uint64_t decoded_tensor_hash(sdk::StorageFile& file, const std::string& what, const PackedRun& run,
                                  const PackedTensor& t);

/// Reads run `run` of `file` (named `what`) back and checks its stored bytes, each tensor
/// (decoded, when coded) and each row that has a checksum in `row_sums`; RuntimeError
/// naming `what`, the run, the tensor and the offset of the first difference.
/// `progress(bytes)` as for hash_range.
void verify_run(sdk::StorageFile& file, const std::string& what, const PackedRun& run,
                std::span<const std::uint64_t> row_sums, const std::function<void(std::uint64_t)>& progress = {});

}  // namespace k3::io::trunk_format
