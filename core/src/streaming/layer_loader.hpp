// Binds weight views (maths/weights.hpp) to bytes read through the storage plugin: one
// layer at a time for the streamed trunk, or everything for a resident model. Every tensor
// is found, checked (dtype, shape) and bound by the tensor table (model/tensor_table.hpp)
// before any pointer is formed.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include <k3/checkpoint.hpp>
#include <k3/model_config.hpp>
#include <k3/storage.hpp>

#include "maths/weights.hpp"
#include "util/aligned_buffer.hpp"

namespace k3::streaming {

class TensorReader;
struct PackedLocations;

/// Reads one layer's tensors (the trunk; the routed experts too when asked) through a
/// TensorReader into memory the caller provides, and binds the views. Used for resident
/// weights and for the streamed trunk's slots alike, so both bind identically.
class LayerLoader {
 public:
  LayerLoader(const ModelConfig& c, TensorReader& reader);
  ~LayerLoader();
  LayerLoader(const LayerLoader&) = delete;
  LayerLoader& operator=(const LayerLoader&) = delete;
  /// Selects layer `li` for read_and_bind(); returns the bytes its tensors need. The first
  /// time (per layer and flags) its tensors are checked against the config (dtype, shape)
  /// and its reads and bindings planned; after that this is a lookup, so refilling a ring
  /// slot allocates nothing. `without_dense_ffn`: leave a dense layer's FFN out (a split
  /// layer streams it).
  std::uint64_t queue(std::size_t li, bool with_experts, bool without_dense_ffn = false);
  /// The floats the fp32 copies of the selected layer's BF16 vectors take.
  [[nodiscard]] std::uint64_t widened_floats() const;
  /// Reads the layer queue() selected into `base` (at least that many bytes, 64-byte
  /// aligned) and binds `out` to it. BF16 vectors are widened into `widening` when it holds
  /// widened_floats() (a ring slot's, reused at every refill), else into memory of their
  /// own (a layer bound once). Throws RuntimeError naming the shard and tensor on a failed
  /// read.
  void read_and_bind(std::byte* base, maths::LayerWeights& out, std::span<float> widening = {});

 private:
  struct Layer;
  const ModelConfig& c_;
  TensorReader& reader_;
  std::size_t layer_ = 0;
  std::vector<Layer> layers_;  // by layer index
};

/// The global tensors (norms, output AttnRes); the embedding table and lm_head only when
/// `tables`. Buffers are appended to `keep`.
maths::GlobalWeights load_global(const ModelConfig& c, TensorReader& reader, bool tables,
                                 std::vector<AlignedBuffer>& keep);
/// The same choosing the tables one by one: a rank of a split model holds the embedding
/// only when it is the first, lm_head only when it is the last (docs/cluster.md).
maths::GlobalWeights load_global(const ModelConfig& c, TensorReader& reader, bool embedding, bool head,
                                 std::vector<AlignedBuffer>& keep);

/// All weights resident in memory, read through a storage backend.
class ResidentWeights {
 public:
  /// `packed` (optional): read the trunk and tables from a packed trunk's trunk.bin.
  ResidentWeights(const ModelConfig& cfg, const CheckpointIndex& index, sdk::StorageBackend& storage,
                  const PackedLocations* packed = nullptr);
  /// Only layers [first, last), the embedding when first is 0 and lm_head when last is the
  /// last layer: a rank of a model split over ranks (docs/cluster.md).
  ResidentWeights(const ModelConfig& cfg, const CheckpointIndex& index, sdk::StorageBackend& storage,
                  const PackedLocations* packed, std::size_t first, std::size_t last);

  [[nodiscard]] const maths::GlobalWeights& global() const noexcept { return global_; }
  [[nodiscard]] const maths::LayerWeights& layer(std::size_t i) const noexcept { return layers_[i]; }
  [[nodiscard]] std::uint64_t bytes_read() const noexcept { return bytes_read_; }
  /// Nanoseconds spent checking packed-trunk bytes at load.
  [[nodiscard]] std::uint64_t verify_ns() const noexcept { return verify_ns_; }

 private:
  std::vector<AlignedBuffer> buffers_;
  maths::GlobalWeights global_;
  std::vector<maths::LayerWeights> layers_;
  std::uint64_t bytes_read_ = 0;
  std::uint64_t verify_ns_ = 0;
};

}  // namespace k3::streaming
