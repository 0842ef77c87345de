// Binds weight views (maths/weights.hpp) to bytes read through the storage plugin: one
// layer at a time for the streamed trunk, or everything for a resident model. Every tensor
// is found, checked (dtype, shape) and bound by the tensor table (model/tensor_table.hpp)
// before any pointer is formed.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <k3/checkpoint.hpp>
#include <k3/model_config.hpp>
#include <k3/storage.hpp>

#include "maths/weights.hpp"
#include "util/aligned_buffer.hpp"

namespace k3::model {

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
  /// Queues layer `li` (dtype and shape checked against the config); returns the bytes it
  /// needs. `without_dense_ffn`: leave a dense layer's FFN out (a split layer streams it).
  std::uint64_t queue(std::size_t li, bool with_experts, bool without_dense_ffn = false);
  /// Reads what queue() listed into `base` (at least that many bytes, 64-byte aligned) and
  /// binds `out` to it. Throws RuntimeError naming the shard and tensor on a failed read.
  void read_and_bind(std::byte* base, LayerWeights& out);

 private:
  struct Handles;
  const ModelConfig& c_;
  TensorReader& reader_;
  std::size_t layer_ = 0;
  std::unique_ptr<Handles> hd_;
};

/// The global tensors (norms, output AttnRes); the embedding table and lm_head only when
/// `tables`. Buffers are appended to `keep`.
GlobalWeights load_global(const ModelConfig& c, TensorReader& reader, bool tables, std::vector<AlignedBuffer>& keep);

/// All weights resident in memory, read through a storage backend.
class ResidentWeights {
 public:
  /// `packed` (optional): read the trunk and tables from a packed trunk's trunk.bin.
  ResidentWeights(const ModelConfig& cfg, const CheckpointIndex& index, sdk::StorageBackend& storage,
                  const PackedLocations* packed = nullptr);

  [[nodiscard]] const GlobalWeights& global() const noexcept { return global_; }
  [[nodiscard]] const LayerWeights& layer(std::size_t i) const noexcept { return layers_[i]; }
  [[nodiscard]] std::uint64_t bytes_read() const noexcept { return bytes_read_; }

 private:
  std::vector<AlignedBuffer> buffers_;
  GlobalWeights global_;
  std::vector<LayerWeights> layers_;
  std::uint64_t bytes_read_ = 0;
};

}  // namespace k3::model
