// The synthetic-checkpoint writer behind `k3host make-model`: a directory in the exact
// released K3 format (docs/model-spec.md §1–2): nested config.json, model-XXXXX-of-YYYYY.safetensors
// shards, model.safetensors.index.json, tiktoken.model and tokenizer_config.json, with seeded
// weights that are identical on every host for the same geometry and seed.
//
// Atomic: everything is written into a temporary sibling directory, synced, then renamed to
// the target, so a crash or an error never leaves a directory that looks like a model.
// An existing non-empty target is refused unless `force` (then it is replaced).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include <k3/geometry.hpp>

namespace k3 {

struct MakeModelOptions {
  std::filesystem::path out;          ///< target directory
  std::optional<std::uint64_t> seed;  ///< overrides the geometry's writer.seed
  std::optional<DTypeMix> dtypes;     ///< overrides the geometry's writer.dtypes
  bool force = false;                 ///< replace an existing non-empty `out`
  /// Real headers, data left as holes (ftruncate): the full K3 layout (~497,000 tensors in
  /// ~96 shards) for index benchmarks without using the disk. The tensors read as zeros.
  bool headers_only = false;
  /// Called on the writing thread after each batch: bytes written so far (sparse bytes count
  /// as written), total. Optional.
  std::function<void(std::uint64_t done, std::uint64_t total)> progress;
};

struct MakeModelResult {
  std::filesystem::path dir;
  std::uint64_t shards = 0;
  std::uint64_t tensors = 0;
  std::uint64_t tensor_bytes = 0;  ///< data bytes (index.json metadata.total_size)
  std::uint64_t file_bytes = 0;    ///< all shard files, headers included
  std::uint64_t seed = 0;
  DTypeMix dtypes = DTypeMix::release;  ///< the mix written
  double seconds = 0;
};

/// Writes `geometry` to options.out. UsageError for a target that exists and is not empty
/// (without force), a geometry that must be headers-only, or too little free disk space;
/// RuntimeError for I/O failures. Nothing is left behind on failure.
MakeModelResult make_model(const ModelGeometry& geometry, const MakeModelOptions& options);

/// tiktoken.model text for `ranks` ranks: the 256 single bytes, then the merges of a
/// deterministic byte-level BPE trained on an embedded English/code/multilingual sample
/// ("base64 rank" per line). Exposed for tests.
std::string make_tiktoken_ranks(std::int64_t ranks);

}  // namespace k3
