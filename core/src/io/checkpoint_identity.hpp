// The checkpoint identity (docs/architecture.md, "Checkpoint identity"): a 64-bit digest of
// what a checkpoint's weights are, computed while CheckpointIndex::open reads the shard
// headers, so that every file derived from a checkpoint (a packed trunk, a state file, a
// trace) can record it and be refused by a run of another checkpoint, even one of the same
// architecture (a fine-tune, a new revision).
//
// Per shard it hashes the name, the size, the header bytes (length prefix and JSON) and up
// to kIdentitySamples blocks of kIdentitySampleBytes of the shard's trunk tensors (every
// tensor but the routed experts' — the bytes every run reads anyway, so a storage fault on
// an expert stays an expert failure, exit 4, and never fails the open), spread evenly over
// them, read in one batch: a few requests per shard over HTTP, 256 KiB at most. A fine-tune
// or a new revision changes essentially every weight, so the sampled blocks differ; a change
// confined to bytes no block covers (a routed expert, a few tensors edited in place) is not
// seen (the pack's and the tier's own checksums still catch damage to what they store).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include <k3/checkpoint.hpp>
#include <k3/storage.hpp>

namespace k3::io {

inline constexpr std::uint64_t kIdentitySamples = 4;
inline constexpr std::uint64_t kIdentitySampleBytes = std::uint64_t{64} << 10;

/// What hashing one shard for the identity read and cost.
struct ShardDigest {
  std::uint64_t digest = 0;
  std::uint64_t sampled_bytes = 0;  ///< tensor bytes read for the samples
};

/// The digest of shard `name` (`file`, opened at `uri`), whose header is `header_json`
/// (the JSON after the 8-byte length prefix) and whose tensors are `tensors`: name, size,
/// header and the sampled blocks of its trunk tensors. RuntimeError naming `uri` and the
/// offset when a sample cannot be read.
ShardDigest shard_digest(sdk::StorageFile& file, const std::string& uri, std::string_view name,
                         std::string_view header_json, std::span<const TensorInfo> tensors);

/// Combines the index json's bytes (empty when the checkpoint has none) and the shard
/// digests (in shard order) into the index's content digest.
std::uint64_t content_digest(std::string_view index_json, std::span<const std::uint64_t> shard_digests);

/// The checkpoint identity of a checkpoint whose config.json hashes to `config_hash`
/// (ModelConfig::source_hash) and whose index has `content_digest`
/// (CheckpointIndex::content_digest): what k3::checkpoint_identity returns.
std::uint64_t identity_of(std::uint64_t config_hash, std::uint64_t content_digest);

}  // namespace k3::io
