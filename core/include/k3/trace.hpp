// Expert traces: every routed-expert request of a run as (token position, layer, expert),
// in request order, independent of cache state, together with which requests the engine
// served together — the input of `k3host sim` and of the belady policy in a live run
// (cache.future). Byte layout (all integers little-endian; docs/cache.md):
//
//   offset size  field
//        0    8  magic "K3TRACE\0"
//        8    4  u32 version (3; versions 1 and 2 are still read)
//       12    4  u32 header bytes (80; records start here; 72 in versions 1 and 2)
//       16    4  u32 layers              decoder layers of the model (record layer < layers)
//       20    4  u32 experts per layer   routed experts per layer (record expert < this)
//       24    4  u32 top-k               experts routed per token and layer
//       28    4  u32 record bytes (8)
//       32    8  u64 architecture fingerprint (given by the caller; 0 = none)
//       40    8  u64 prompt hash           (given by the caller; 0 = none)
//       48    8  u64 expert bytes          bytes of one routed expert (0 = unknown)
//       56    8  u64 record count
//       64    8  u64 XXH64 (seed 0) of all record bytes
//       72    8  u64 checkpoint identity (k3/checkpoint.hpp; given by the caller; 0 = none;
//                  absent in versions 1 and 2, which read as 0)
//       80  8*n  records: u32 position word, u16 layer, u16 expert
//
// The checkpoint identity ties a trace of record (trace.out) to the weights that routed it:
// cache.future refuses a trace of another checkpoint, even of the same architecture, and one
// without an identity. A generated trace (`k3host sim`) has none, and sim needs none.
//
// Position word, version 2: bits 0-30 the token position; bit 31 set on the first record of
// a serving group — the requests the engine serves together (one forward chunk's requests
// at one layer; a decode step is a chunk of one token). Every record of a group has the
// same layer, and the first record of a trace always starts a group. Version 1 has no
// groups (the word is the position): a reader makes each run of records with the same
// position and layer one group.
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

inline constexpr std::uint32_t kTraceVersion = 3;
/// Bit of the version-2 position word marking the first record of a serving group.
inline constexpr std::uint32_t kTraceGroupBit = 0x80000000u;
/// Largest token position a version-2 trace holds.
inline constexpr std::uint32_t kTraceMaxPosition = kTraceGroupBit - 1;
inline constexpr std::size_t kTraceHeaderBytes = 80;
/// The header of versions 1 and 2 (no checkpoint identity).
inline constexpr std::size_t kTraceHeaderBytesV2 = 72;
inline constexpr std::size_t kTraceRecordBytes = 8;
/// The most records a trace may hold (a 1 GB file; 85,000 tokens of the full K3's 92
/// layers x top-16): read_trace holds the file and its records in memory at once (about
/// 2.5 GB at the cap), so a larger file is refused before it is read, and the generator
/// refuses settings that would make one.
inline constexpr std::uint64_t kTraceMaxRecords = 125'000'000;
inline constexpr std::uint64_t kTraceMaxFileBytes = kTraceHeaderBytes + kTraceMaxRecords * kTraceRecordBytes;

struct TraceHeader {
  std::uint32_t layers = 0;               ///< decoder layers (records carry the model's 0-based layer index)
  std::uint32_t experts_per_layer = 0;    ///< routed experts per layer
  std::uint32_t top_k = 0;                ///< experts routed per token and layer
  std::uint64_t arch_fingerprint = 0;     ///< the model's architecture fingerprint, from the caller
  std::uint64_t prompt_hash = 0;          ///< hash of the prompt ids, from the caller
  std::uint64_t expert_bytes = 0;         ///< bytes of one routed expert (0 = unknown)
  std::uint64_t record_count = 0;         ///< set by the writer on close / by the reader
  std::uint64_t checkpoint_identity = 0;  ///< the checkpoint that routed it, from the caller; 0 = none
};

struct TraceRecord {
  std::uint32_t position = 0;  ///< token position in the sequence
  std::uint16_t layer = 0;     ///< 0-based decoder layer
  std::uint16_t expert = 0;    ///< routed expert id within the layer
  bool starts_group = false;   ///< first request of a serving group (see the file comment)
  friend bool operator==(const TraceRecord&, const TraceRecord&) = default;
};

struct Trace {
  TraceHeader header;
  std::vector<TraceRecord> records;
};

/// Streams records to "<file>.tmp.<pid>" (buffered) and renames it to `file` on close().
/// Destroying a writer that was not closed removes the temporary file: a failed run leaves
/// no trace rather than a truncated one. (A run stopped by Ctrl-C closes its writer: its
/// trace is complete for the ids it fed.) Not thread-safe: one routing thread adds.
class TraceWriter {
 public:
  /// UsageError for a geometry the format cannot hold (0 or > 65536 layers or experts);
  /// RuntimeError when the temporary file cannot be created.
  TraceWriter(std::filesystem::path file, const TraceHeader& header);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  /// The next record added starts a serving group. The first record always does, and so
  /// does a record whose layer differs from the previous record's (a group is one layer's).
  void begin_group() noexcept;
  /// One request. RuntimeError if position, layer or expert is outside the header's geometry
  /// (or position outside 0 … kTraceMaxPosition), or after close().
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
/// trace, of another version, truncated, longer than its count, corrupt (checksum), holds a
/// record outside its geometry or a group that spans layers. Version 1 files get their
/// groups from (position, layer) runs (group_by_token_layer).
Trace read_trace(const std::filesystem::path& file);
/// Reads and checks only the header (magic, version, sizes, geometry, count against the
/// file size); the same errors as read_trace for those.
TraceHeader read_trace_header(const std::filesystem::path& file);

/// Writes `trace` (header geometry + records, groups included) through a TraceWriter.
void write_trace(const std::filesystem::path& file, const Trace& trace);

/// Marks every run of records with the same position and layer as one serving group (the
/// grouping of a version-1 trace, and of a run that serves one token at a time).
void group_by_token_layer(Trace& trace) noexcept;

/// The prompt hash a trace header carries: XXH64 (seed 0) of the ids as little-endian u32.
std::uint64_t trace_prompt_hash(std::span<const std::uint32_t> prompt_ids) noexcept;

/// Refuses a trace recorded by another run: UsageError "<file>: ... recorded with X, this
/// run has Y" for the first of layers, experts per layer, top-k, architecture fingerprint,
/// checkpoint identity (when `run` has one: a recorded trace without one is refused too)
/// and (when `compare_prompt`) prompt hash that differs between `recorded` and `run`.
void require_trace_of_run(const std::filesystem::path& file, const TraceHeader& recorded, const TraceHeader& run,
                          bool compare_prompt);

}  // namespace k3
