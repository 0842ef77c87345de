// Row chunks (docs/streaming.md "Split dense layers"): multiplies a bf16 matrix that stays
// on storage. Its rows are read in chunks into two buffers; a reader thread fills the next
// chunk while the compute thread multiplies the current one. Every output row is its own
// dot product (the kernels' fixed partition is per row), so the bits equal one matmul over
// the resident matrix. Serves lm_head in ultra and the FFN of split dense layers.
#pragma once
#include <cstdint>
#include <exception>
#include <vector>

#include <k3/checkpoint.hpp>
#include <k3/storage.hpp>

#include "io/pack_trunk_check.hpp"
#include "maths/ops.hpp"
#include "maths/weights.hpp"
#include "streaming/stream_counters.hpp"
#include "util/aligned_buffer.hpp"
#include "util/reader_thread.hpp"

namespace k3::streaming {

/// Where a tensor's bytes are: a file the streamer opened, and the offset in it.
struct TensorLocation {
  const TensorInfo* info = nullptr;  ///< name, dtype, shape (from the checkpoint index)
  std::uint32_t file = 0;            ///< index into the streamer's files
  std::uint64_t offset = 0;          ///< of row 0 in that file
  /// From a packed trunk: each chunk's rows are checked against its row checksums on the
  /// reader thread before the chunk is published; null for the checkpoint's own bytes.
  const io::trunk_check::TensorCheck* check = nullptr;
};

class RowChunkStreamer {
 public:
  /// `files` are opened by the caller (shards or trunk.bin) and outlive the streamer; only
  /// the reader thread reads them. `chunk_bytes` per buffer (at least one row).
  RowChunkStreamer(std::vector<sdk::StorageFile*> files, std::uint64_t chunk_bytes, StreamCounters& counters);
  ~RowChunkStreamer();
  RowChunkStreamer(const RowChunkStreamer&) = delete;
  RowChunkStreamer& operator=(const RowChunkStreamer&) = delete;

  /// out[t·rows + r] = (W x_t)[r] for the [rows, cols] BF16 or F32 tensor at `where`, x [n, cols].
  /// `table`: count the bytes read as table bytes (lm_head) instead of trunk bytes.
  /// RuntimeError naming the tensor and rows when a read fails after retries.
  void matmul(const maths::Ops& ops, const TensorLocation& where, const float* x, std::size_t n, float* out,
              bool table);

 private:
  struct Job {
    const TensorLocation* where = nullptr;
    std::uint64_t first = 0, count = 0;
    int buffer = 0;
    bool table = false;  ///< count the bytes as table bytes
  };
  void read(const Job& job);
  void submit(const Job& job);
  void wait(int buffer);

  std::vector<sdk::StorageFile*> files_;
  std::uint64_t chunk_bytes_;
  StreamCounters& counters_;
  AlignedBuffer buffers_[2];
  std::vector<float> out_;

  // Under the reader's lock.
  bool ready_[2] = {false, false};
  std::exception_ptr error_[2];
  util::ReaderThread<Job> reader_;  // last: stopped before the buffers go
};

/// One matrix of a split dense layer, as the forward pass sees it.
class StreamedFfnMatrix final : public maths::StreamedMatrix {
 public:
  StreamedFfnMatrix(RowChunkStreamer& streamer, TensorLocation where) : streamer_(streamer), where_(where) {}
  void matmul(const maths::Ops& ops, const float* x, std::size_t n, float* out) override {
    streamer_.matmul(ops, where_, x, n, out, false);
  }

 private:
  RowChunkStreamer& streamer_;
  TensorLocation where_;
};

}  // namespace k3::streaming
