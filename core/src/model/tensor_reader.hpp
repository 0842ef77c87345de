// Reads checkpoint tensors through the storage plugin into host buffers.
// Requests are gathered first, then read as one batch per shard in file-offset order.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <k3/checkpoint.hpp>
#include <k3/storage.hpp>

#include "util/aligned_buffer.hpp"

namespace k3::model {

class TensorReader {
 public:
  TensorReader(const CheckpointIndex& index, sdk::StorageBackend& storage);
  ~TensorReader();

  /// Queues a tensor after checking its dtype and shape; returns its handle.
  std::size_t want(const std::string& name, DType dtype, const std::vector<std::uint64_t>& shape);
  /// Queues a tensor that may have one of several shapes; returns its handle.
  std::size_t want_any(const std::string& name, DType dtype, const std::vector<std::vector<std::uint64_t>>& shapes);
  /// Reads every queued tensor into one new buffer (each tensor 64-byte aligned).
  /// Throws RuntimeError naming the shard and tensor on a failed read.
  AlignedBuffer read_all();
  /// Pointer to a tensor in the buffer returned by the last read_all().
  [[nodiscard]] const std::byte* data(const AlignedBuffer& buf, std::size_t handle) const;
  [[nodiscard]] const TensorInfo& info(std::size_t handle) const { return *wanted_[handle].info; }
  [[nodiscard]] std::uint64_t bytes_read() const noexcept { return bytes_read_; }
  /// Forget the queue (keeps the open files).
  void clear() { wanted_.clear(); }

 private:
  struct Wanted {
    const TensorInfo* info;
    std::uint64_t buffer_offset;
  };
  sdk::StorageFile& file(std::uint32_t index);

  const CheckpointIndex& index_;
  sdk::StorageBackend& storage_;
  std::vector<std::unique_ptr<sdk::StorageFile>> files_;
  std::vector<Wanted> wanted_;
  std::uint64_t bytes_read_ = 0;
};

}  // namespace k3::model
