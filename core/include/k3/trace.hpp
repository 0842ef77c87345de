// Expert traces: every routed-expert request of a run as (token position, layer, expert),
// in request order, independent of cache state — the input of `k3host sim` and of the
// belady policy in a live run. Byte layout (all integers little-endian; docs/cache.md):
//
//   offset size  field
//        0    8  magic "K3TRACE\0"
//        8    4  u32 version (1)
//       12    4  u32 header bytes (72; records start here)
//       16    4  u32 layers              decoder layers of the model (record layer < layers)
//       20    4  u32 experts per layer   routed experts per layer (record expert < this)
//       24    4  u32 top-k               experts routed per token and layer
//       28    4  u32 record bytes (8)
//       32    8  u64 architecture fingerprint (given by the caller; 0 = none)
//       40    8  u64 prompt hash           (given by the caller; 0 = none)
//       48    8  u64 expert bytes          bytes of one routed expert (0 = unknown)
//       56    8  u64 record count
//       64    8  u64 XXH64 (seed 0) of all record bytes
//       72  8*n  records: u32 token position, u16 layer, u16 expert
//
// Files are written to "<file>.tmp.<pid>" and renamed into place on close, so a reader
// never sees a half-written trace; the reader checks magic, version, sizes, the record
// count against the file size, the checksum and every record against the geometry, and
// names the file in every error (UsageError, exit 2).
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

namespace k3 {

inline constexpr std::uint32_t kTraceVersion = 1;
inline constexpr std::size_t kTraceHeaderBytes = 72;
inline constexpr std::size_t kTraceRecordBytes = 8;

struct TraceHeader {
  std::uint32_t layers = 0;             ///< decoder layers (records carry the model's 0-based layer index)
  std::uint32_t experts_per_layer = 0;  ///< routed experts per layer
  std::uint32_t top_k = 0;              ///< experts routed per token and layer
  std::uint64_t arch_fingerprint = 0;   ///< the model's architecture fingerprint, from the caller
  std::uint64_t prompt_hash = 0;        ///< hash of the prompt ids, from the caller
  std::uint64_t expert_bytes = 0;       ///< bytes of one routed expert (0 = unknown)
  std::uint64_t record_count = 0;       ///< set by the writer on close / by the reader
};

struct TraceRecord {
  std::uint32_t position = 0;  ///< token position in the sequence
  std::uint16_t layer = 0;     ///< 0-based decoder layer
  std::uint16_t expert = 0;    ///< routed expert id within the layer
  friend bool operator==(const TraceRecord&, const TraceRecord&) = default;
};

struct Trace {
  TraceHeader header;
  std::vector<TraceRecord> records;
};

/// Streams records to "<file>.tmp.<pid>" (buffered) and renames it to `file` on close().
/// Destroying a writer that was not closed removes the temporary file: an interrupted run
/// leaves no trace rather than a truncated one. Not thread-safe: one routing thread adds.
class TraceWriter {
 public:
  /// UsageError for a geometry the format cannot hold (0 or > 65536 layers or experts);
  /// RuntimeError when the temporary file cannot be created.
  TraceWriter(std::filesystem::path file, const TraceHeader& header);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  /// One request. RuntimeError if position, layer or expert is outside the header's geometry
  /// (or position outside u32), or after close().
  void add(std::int64_t position, std::size_t layer, std::uint32_t expert);
  /// One token-layer's routing, in top-k order (the shape RoutingListener::on_route gives).
  void add_layer(std::int64_t position, std::size_t layer, std::span<const std::uint32_t> experts);
  /// Flushes, writes the final header (count, checksum), fsyncs and renames into place.
  void close();
  [[nodiscard]] std::uint64_t records() const noexcept;
  [[nodiscard]] const std::filesystem::path& file() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Reads and validates a whole trace. UsageError naming `file` when it is missing, not a
/// trace, of another version, truncated, longer than its count, corrupt (checksum) or
/// holds a record outside its geometry.
Trace read_trace(const std::filesystem::path& file);

/// Writes `trace` (header geometry + records) through a TraceWriter.
void write_trace(const std::filesystem::path& file, const Trace& trace);

}  // namespace k3
