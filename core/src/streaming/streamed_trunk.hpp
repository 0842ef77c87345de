// The streamed trunk (docs/streaming.md "Trunk ring"): the layers the plan pins stay
// resident; the others cycle through a ring of fixed slots that a reader thread fills
// ahead of the compute. The layer walk repeats every token (0, 1, …, N-1, 0, …), so the
// read-ahead is simply "the next unpinned layers after the one being computed".
//
// Reads go through the storage plugin per tensor, in offset order, from the safetensors
// shards, or as one aligned run per layer from a packed trunk (model.packed_trunk); the
// layer loader is the same as the resident one, so binding is identical. A split dense
// layer (plan.split_dense_ffn) holds only its attention part in a slot; its FFN matrices
// are multiplied while read in row chunks (streaming/row_chunks.hpp).
//
// The embedding table is never resident here: each token's row is read on demand. lm_head
// is resident, or read in row chunks when the plan says so (memory.stream_embedding).
#pragma once
#include <array>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <vector>

#include <k3/checkpoint.hpp>
#include <k3/plan.hpp>
#include <k3/storage.hpp>

#include "maths/forward.hpp"
#include "maths/router_copy.hpp"
#include "streaming/layer_loader.hpp"
#include "streaming/row_chunks.hpp"
#include "streaming/stream_counters.hpp"
#include "streaming/tensor_reader.hpp"
#include "util/aligned_buffer.hpp"
#include "util/reader_thread.hpp"

namespace k3::streaming {

class StreamedTrunk final : public maths::WeightSource {
 public:
  /// Reads the global norms, lm_head (unless streamed) and the pinned layers now; starts
  /// the reader thread. UsageError for a tensor that does not match the config.
  /// `packed` (optional): read the trunk and tables from a packed trunk's trunk.bin, one
  /// request per layer.
  StreamedTrunk(const ModelConfig& c, const CheckpointIndex& index, sdk::StorageBackend& storage,
                const MemoryPlan& plan, StreamCounters& counters, const streaming::PackedLocations* packed = nullptr);
  ~StreamedTrunk() override;
  StreamedTrunk(const StreamedTrunk&) = delete;
  StreamedTrunk& operator=(const StreamedTrunk&) = delete;

  const maths::GlobalWeights& global() override { return global_; }
  /// Pinned: at once. Streamed: blocks until its slot is filled (reading it now if the
  /// read-ahead did not), then queues the read-ahead of the following layers.
  const maths::LayerWeights& acquire_layer(std::size_t layer) override;
  /// The slot may be refilled from now on.
  void release_layer(std::size_t layer) override;
  /// Pinned, or its ring slot already read: only the compute thread starts reads, so the
  /// slot stays as it is until the layer being computed is released.
  const maths::MoeWeights* router_at_hand(std::size_t layer) override;
  /// A streamed MoE layer's router copy (MemoryPlan::router_copy_bits), once the layer was
  /// read once; the compute thread alone makes and reads the copies.
  const maths::RouterCopy* router_copy(std::size_t layer) override;
  void embed(std::span<const std::uint32_t> tokens, std::size_t E, float* P) override;
  void head(const maths::Ops& ops, const float* x, std::size_t n, float* logits) override;

 private:
  enum class SlotState { empty, loading, ready };
  struct Slot {
    AlignedBuffer buf;
    std::int64_t layer = -1;
    SlotState state = SlotState::empty;
    bool held = false;
    std::vector<float> widened;  ///< the fp32 copies of the layer's BF16 vectors (sized once)
    maths::LayerWeights w;
    std::exception_ptr error;
  };

  struct Fill {  ///< a reader job: fill `slot` with `layer`
    int slot = -1;
    std::size_t layer = 0;
  };
  void fill(const Fill& job);
  /// Waits for `layer`'s slot to be read (reading it now if the read-ahead did not; the wait
  /// counted as I/O wait), holds it and queues the read-ahead of the following layers.
  Slot& hold_slot(std::size_t layer);
  /// The next `ring` streamed layers after `layer`, in walk order (cyclic), into upcoming_.
  std::span<const std::size_t> upcoming(std::size_t layer);
  [[nodiscard]] int slot_of(std::size_t layer) const;
  /// A slot that may be refilled without disturbing the walk from `layer` (whose next
  /// layers are `next`), or -1.
  [[nodiscard]] int claimable(std::size_t layer, std::span<const std::size_t> next) const;
  void start_read(int slot, std::size_t layer);
  void read_ahead(std::size_t layer);

  StreamCounters& counters_;
  std::vector<bool> pinned_;
  std::vector<bool> ours_;   ///< this rank's layers (all of them unless the model is split over ranks)
  std::vector<bool> split_;  ///< streamed dense layer whose FFN is read in row chunks
  std::size_t n_streamed_ = 0;
  std::uint64_t head_chunk_rows_ = 0;

  streaming::TensorReader main_reader_;  // construction, embedding rows, lm_head chunks
  std::vector<AlignedBuffer> keep_;
  maths::GlobalWeights global_;
  std::vector<maths::LayerWeights> pinned_layers_;
  std::vector<std::unique_ptr<maths::RouterCopy>> router_copies_;  ///< per layer; null: none
  const TensorInfo* embed_info_ = nullptr;
  streaming::TensorSource embed_src_;
  const TensorInfo* head_info_ = nullptr;
  // embed()'s row buffer, reads and order: grown to the largest chunk, then reused.
  std::vector<std::byte> rows_;
  std::vector<sdk::ReadRequest> row_reads_;
  std::vector<std::size_t> row_order_;

  // Row chunks: lm_head in ultra and the FFNs of split layers.
  streaming::TensorReader chunk_files_;  // opens the files the streamer reads (its thread only reads)
  std::unique_ptr<RowChunkStreamer> row_chunks_;
  TensorLocation head_where_;
  std::vector<std::array<std::unique_ptr<StreamedFfnMatrix>, 3>> ffn_;

  streaming::TensorReader ring_reader_;  // the reader thread only
  streaming::LayerLoader ring_loader_;
  // Under the reader's lock.
  std::vector<Slot> slots_;
  int held_ = -1;
  std::vector<std::size_t> upcoming_;  ///< upcoming()'s answer, capacity slots
  util::ReaderThread<Fill> reader_;    // last: stopped before the slots go
};

}  // namespace k3::streaming
