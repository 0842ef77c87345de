// Reads checkpoint tensors through the storage plugin into host buffers.
// Requests are gathered first, then read as one batch per file in file-offset order.
// With a packed trunk (k3host pack-trunk) the tensors it holds come from its trunk.bin
// instead of the shards: one layer is one 4096-aligned run there, and the reader places the
// tensors in memory as the run does, so a whole layer is a single read. From a coded packed
// trunk (pack-trunk --codec), a layer's tensor streams are read in pieces of kCodedPiece
// bytes and decoded on the reading thread straight into place (io/pack_trunk_codec.hpp).
// Every tensor read from trunk.bin is checked against its XXH3-64 in trunk.json on the
// reading thread, before read() returns (io/pack_trunk_check.hpp).
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <k3/checkpoint.hpp>
#include <k3/packed_trunk.hpp>
#include <k3/storage.hpp>

#include "io/pack_trunk_check.hpp"
#include "io/pack_trunk_codec.hpp"
#include "util/aligned_buffer.hpp"

namespace k3::streaming {

/// Reads a batch, then re-reads the requests that failed, up to `attempts` reads in all
/// (a transient fault — EIO, a short read — recovers). Returns the last failure, if any.
sdk::Status read_with_retry(sdk::StorageFile& file, std::span<sdk::ReadRequest> batch, int attempts = 3);

/// Where a packed trunk holds each of its tensors (the offset in its trunk.bin) and what
/// its bytes must hash to. Move-only: the checks point into its row table.
struct PackedLocations {
  struct Where {
    std::uint64_t offset = 0;            ///< of the tensor's bytes, or of its coded stream
    std::uint64_t coded_bytes = 0;       ///< the coded stream's length; 0: raw bytes
    std::size_t run = 0;                 ///< index into runs
    io::trunk_check::TensorCheck check;  ///< its checksum(s) and names for messages
  };
  PackedLocations() = default;
  PackedLocations(PackedLocations&&) = default;
  PackedLocations& operator=(PackedLocations&&) = default;
  PackedLocations(const PackedLocations&) = delete;
  PackedLocations& operator=(const PackedLocations&) = delete;

  std::filesystem::path bin;
  std::uint64_t bin_bytes = 0;
  std::unordered_map<std::string, Where> where;
  std::vector<std::string> runs;        ///< run names ("layer 3"), for messages
  std::vector<std::uint64_t> row_sums;  ///< the row table (the checks' rows point into it)
  /// Every tensor of every run (layers and globals) of `trunk`.
  static PackedLocations of(const PackedTrunk& trunk);
};

/// A tensor's bytes: the open file holding them and the offset of its first byte there.
struct TensorSource {
  sdk::StorageFile* file = nullptr;
  std::uint64_t offset = 0;
  std::string file_name;  ///< for messages
  /// Read from a packed trunk: what its bytes must hash to (rows included); else null, the
  /// checkpoint's own bytes.
  const io::trunk_check::TensorCheck* check = nullptr;
};

/// A queue laid out and grouped into read batches once (TensorReader::plan()), so that
/// reading the same tensors again (a ring slot refilled every token) builds nothing and
/// allocates nothing.
struct ReadPlan {
  struct Tensor {
    const TensorInfo* info = nullptr;
    std::uint64_t buffer_offset = 0;                      ///< from the memory the plan is read into
    std::uint64_t src_offset = 0;                         ///< in its file (of the coded stream when coded)
    std::uint64_t coded_bytes = 0;                        ///< the coded stream's length; 0: raw
    std::size_t run = 0;                                  ///< coded: PackedLocations::runs index, for messages
    const io::trunk_check::TensorCheck* check = nullptr;  ///< from a packed trunk: checked once read
  };
  /// One read: neighbouring tensors merged when their gap is the same in file and memory.
  /// Coded (a packed trunk's coded streams): neighbouring streams of one run merged, read
  /// in pieces and decoded into place.
  struct Request {
    std::uint64_t src_offset = 0, length = 0, buffer_offset = 0;
    std::size_t tensor = 0;  ///< the first tensor it covers, for messages
    bool coded = false;
    std::size_t first = 0, count = 0;  ///< coded: the tensors it covers, File::order[first, +count)
  };
  struct File {
    std::uint32_t index = 0;         ///< shard index, or files().size() for trunk.bin
    std::vector<Request> requests;   ///< in file-offset order
    std::vector<std::size_t> order;  ///< handles in file-offset order
    std::uint64_t bytes = 0;         ///< the bytes it reads (bytes_read()): a coded stream's coded length
  };
  std::vector<Tensor> tensors;  ///< in queue order: a handle indexes it
  std::vector<File> files;      ///< ascending file index
  std::uint64_t bytes = 0;      ///< the memory the tensors need (64-byte aligned each)

  [[nodiscard]] const std::byte* data(const std::byte* base, std::size_t handle) const {
    return base + tensors[handle].buffer_offset;
  }
};

class TensorReader {
 public:
  /// `packed` (optional, outlives the reader): read the tensors it holds from trunk.bin.
  TensorReader(const CheckpointIndex& index, sdk::StorageBackend& storage, const PackedLocations* packed = nullptr);
  ~TensorReader();

  /// Queues a tensor after checking its dtype and shape; returns its handle.
  std::size_t want(const std::string& name, DType dtype, const std::vector<std::uint64_t>& shape);
  /// Queues a tensor already checked (model/tensor_table.hpp require()); returns its handle.
  std::size_t want(const TensorInfo& info);
  /// Queues a tensor that may have one of several shapes; returns its handle.
  std::size_t want_any(const std::string& name, DType dtype, const std::vector<std::vector<std::uint64_t>>& shapes);
  /// Reads every queued tensor into one new buffer (each tensor 64-byte aligned).
  /// Throws RuntimeError naming the shard and tensor on a failed read.
  AlignedBuffer read_all();
  /// Places the queued tensors (64-byte aligned, queue order) and returns the bytes needed.
  std::uint64_t layout();
  /// Reads the queued tensors into `base` (at least layout() bytes), one batch per shard in
  /// offset order. Throws like read_all().
  void read_into(std::byte* base);
  /// Lays the queue out (layout()) and groups it into read batches, to read it with read()
  /// as often as wanted. Reserves what read() needs, so reading the plan never allocates.
  ReadPlan plan();
  /// Reads `plan` into `base` (at least plan.bytes), one batch per file in offset order.
  /// Throws RuntimeError naming the file and tensor on a failed read.
  void read(const ReadPlan& plan, std::byte* base);
  /// Pointer to a tensor in the buffer returned by the last read_all().
  [[nodiscard]] const std::byte* data(const AlignedBuffer& buf, std::size_t handle) const;
  /// Pointer to a tensor in memory laid out by layout() at `base`.
  [[nodiscard]] const std::byte* data(const std::byte* base, std::size_t handle) const {
    return base + wanted_[handle].buffer_offset;
  }
  [[nodiscard]] const TensorInfo& info(std::size_t handle) const { return *wanted_[handle].info; }
  /// Bytes read from storage so far (a coded tensor counts its coded stream's length).
  [[nodiscard]] std::uint64_t bytes_read() const noexcept { return bytes_read_; }
  [[nodiscard]] const CheckpointIndex& index() const noexcept { return index_; }
  /// Forget the queue (keeps the open files).
  void clear() { wanted_.clear(); }
  /// Shard `index` of the checkpoint (or, at index files().size(), the packed trunk.bin),
  /// opened through the storage plugin on first use (size checked against the index). Not
  /// thread-safe: one reader per thread.
  /// Whether shard `i` is open already (file() would not open it).
  [[nodiscard]] bool is_open(std::uint32_t i) const noexcept { return i < files_.size() && files_[i] != nullptr; }
  sdk::StorageFile& file(std::uint32_t index);
  /// Where `t`'s raw bytes are read from (the packed trunk when it holds them uncoded, else
  /// its shard), opening the file now: for reads of parts of a tensor (rows, chunks).
  TensorSource locate(const TensorInfo& t);
  /// Bytes read from the coded trunk.bin (the coded streams) so far.
  [[nodiscard]] std::uint64_t coded_bytes_read() const noexcept { return coded_bytes_read_; }
  /// Nanoseconds spent checking bytes of the packed trunk against trunk.json so far.
  [[nodiscard]] std::uint64_t verify_ns() const noexcept { return verify_ns_; }

  /// A coded request is read in pieces of this many bytes (or the rest of it), the next
  /// while the current one is decoded: small enough that a layer of a few MB is read and
  /// decoded in overlap (on demo, 1-2 MiB pieces gave ~0.3 s/token where 32 MiB gave ~0.43),
  /// large enough for the disk.
  static constexpr std::uint64_t kCodedPiece = std::uint64_t{2} << 20;
  /// A raw request from trunk.bin is read in pieces of this many bytes, each hashed while the
  /// next is read, so checking a large layer (K3's are ~1.2 GB) costs about its last piece's
  /// hash, not the layer's. Large enough that a piece is still many parallel ranges over
  /// http (max_range_bytes, 8 MiB by default) and a smaller layer (demo's, fortune's) one read.
  static constexpr std::uint64_t kRawPiece = std::uint64_t{64} << 20;
  /// Another piece size than kRawPiece (the tests read small layers in many pieces).
  void set_raw_piece(std::uint64_t bytes) noexcept { raw_piece_ = bytes > 0 ? bytes : kRawPiece; }
  /// Another piece size than kCodedPiece (benchmarks: the size a disk wants at K3's layer sizes).
  void set_coded_piece(std::uint64_t bytes) noexcept { coded_piece_ = bytes > 0 ? bytes : kCodedPiece; }

 private:
  struct Wanted {
    const TensorInfo* info;
    std::uint64_t buffer_offset;
    std::uint32_t src_file;     ///< shard index, or files().size() for trunk.bin
    std::uint64_t src_offset;   ///< of the tensor (or its coded stream) in that file
    std::uint64_t coded_bytes;  ///< its coded stream's length; 0: raw
  };
  struct Source {
    std::uint32_t file;
    std::uint64_t offset, coded_bytes;
  };
  void add(const TensorInfo& info);
  /// Where a tensor is read from: trunk.bin when the packed trunk holds it (coded or not),
  /// else its shard. `raw_only`: a coded tensor from its shard.
  [[nodiscard]] Source source_of(const TensorInfo& info, bool raw_only = false) const;
  void read_coded(const ReadPlan& plan, const ReadPlan::File& f, const ReadPlan::Request& r, std::byte* base);
  /// The raw requests of `f` (trunk.bin) read in pieces of raw_piece_, each hashed into its
  /// tensors' checksums while the next is read, every tensor checked once its last byte is in.
  void read_raw_checked(const ReadPlan& plan, const ReadPlan::File& f, std::byte* base);
  [[nodiscard]] std::string file_name(std::uint32_t index) const;

  const CheckpointIndex& index_;
  sdk::StorageBackend& storage_;
  const PackedLocations* packed_ = nullptr;
  std::vector<std::unique_ptr<sdk::StorageFile>> files_;
  std::vector<Wanted> wanted_;
  std::vector<sdk::ReadRequest> batch_;  // read()'s requests, reserved by plan()
  // Made at the first coded read, kept: refilling a ring slot allocates nothing.
  std::unique_ptr<io::trunk_codec::Decoder> decoder_;
  std::unique_ptr<io::trunk_codec::ReadAhead> ahead_;  // reads the next piece while one is decoded or hashed
  struct HashState;
  std::unique_ptr<HashState> hash_;  // the XXH3 state of the tensor being checked (read_raw_checked)
  io::trunk_codec::FileInput::Buffers staging_;
  std::uint64_t bytes_read_ = 0;
  std::uint64_t coded_bytes_read_ = 0;
  std::uint64_t verify_ns_ = 0;
  std::uint64_t raw_piece_ = kRawPiece;
  std::uint64_t coded_piece_ = kCodedPiece;
};

}  // namespace k3::streaming
