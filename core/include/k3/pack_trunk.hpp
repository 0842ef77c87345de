// `k3host pack-trunk`: writes a checkpoint's trunk as a packed trunk (its format, and the
// reader a run uses, are k3/packed_trunk.hpp): every layer's non-expert tensors as one
// 4096-aligned run in OUT/trunk.bin plus OUT/trunk.json describing the runs.
//
// Atomicity: pack_trunk writes into OUT.tmp.<pid>/, verifies trunk.bin by reading it back,
// writes trunk.json last and only then renames the folder to OUT, so a folder without a
// valid trunk.json is never a finished trunk and PackedTrunk::open refuses it.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <k3/packed_trunk.hpp>

namespace k3 {

/// Layers first..last, inclusive (pack-trunk --layers A-B).
struct TrunkLayerRange {
  std::int64_t first = 0;
  std::int64_t last = 0;
};

struct PackTrunkOptions {
  std::filesystem::path model;    ///< checkpoint directory (config.json + *.safetensors)
  std::filesystem::path out;      ///< target directory
  bool force = false;             ///< replace an existing `out`
  std::string storage = "posix";  ///< storage plugin that reads the checkpoint
  std::string codec = "none";     ///< "none" (version 1), "bf16-zstd" or "bf16-huff" (coded layer runs)
  int codec_level = 1;            ///< zstd level of the exponent frames (bf16-zstd)
  /// Pack only these layers (none: the whole trunk, its global tensors included). The other
  /// layers and the global tensors stay in the shards, where a run reads them.
  std::optional<TrunkLayerRange> layers;
  /// Called with (bytes done, bytes total) while copying and again while verifying.
  std::function<void(std::string_view phase, std::uint64_t done, std::uint64_t total)> progress;
};

struct PackTrunkResult {
  std::filesystem::path dir;
  std::uint64_t runs = 0;
  std::uint64_t tensors = 0;
  std::uint64_t data_bytes = 0;    ///< tensor bytes copied
  std::uint64_t bin_bytes = 0;     ///< size of trunk.bin (with alignment padding)
  std::uint64_t stored_bytes = 0;  ///< the runs' bytes in trunk.bin (coded or not, no padding)
  std::uint64_t row_sums = 0;      ///< rows with a checksum of their own
  std::uint64_t identity = 0;      ///< the checkpoint identity recorded
};

/// Packs the trunk of `model` into `out`. UsageError for bad input (missing model, `out`
/// exists without force, a layer range outside the model); RuntimeError for I/O failures
/// and a failed verification.
PackTrunkResult pack_trunk(const PackTrunkOptions& options);

}  // namespace k3
