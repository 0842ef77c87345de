// The packed trunk's format and its reader: every layer's non-expert tensors as one 4096-aligned run in
// OUT/trunk.bin, so streaming a layer is one aligned read (O_DIRECT-friendly), plus
// OUT/trunk.json describing the runs. The global tensors (embedding, final norm, output
// AttnRes, lm_head) get one run each.
//
// trunk.json (version 3; docs/streaming.md, "Packed trunk"):
//   { "format": "k3host-trunk", "version": 3, "align": 4096, "codec": "none",
//     "checkpoint_identity": "<16 hex digits>", "model": "<checkpoint dir>",
//     "trunk_bin_bytes": N, "n_layers": L, "layer_range": [A, B],
//     "row_sums": { "file_off": o, "count": n, "xxh3": "<16 hex>" },
//     "layers":  [ { "layer": i, "file_off": o, "nbytes": n, "xxh3": "<16 hex>",
//                    "tensors": [ { "name", "dtype", "shape": [..], "off", "nbytes", "xxh3",
//                                   "row_sums": k (only for tensors read by rows) } ] } ],
//     "globals": [ { "name": "<tensor name>", "file_off", "nbytes", "xxh3", "tensors": [ one ] } ] }
// file_off is a multiple of 4096; nbytes is the run's data length (the run is zero-padded
// to the next 4096 in the file); a tensor's off is relative to its run (64-byte aligned).
// Checksums are XXH3-64 (seed 0): a run's "xxh3" covers its stored bytes; a tensor's covers
// its bytes as the model sees them (decoded, for a coded run). The tensors a run reads in
// pieces (the embedding's rows, lm_head's and a split dense layer's FFN row chunks) have a
// checksum per row too: "row_sums" is the index of the tensor's row 0 in the row table, n
// u64 little-endian XXH3-64 at "file_off" in trunk.bin, whose own "xxh3" trunk.json holds.
// Every byte read from trunk.bin is checked against one of these before the model uses it
// (RuntimeError, exit 1, naming trunk.bin, the run and the offset).
//
// "checkpoint_identity" is the identity (k3/checkpoint.hpp) of the checkpoint packed: a run
// of any other checkpoint, of the same architecture or not, refuses the trunk (exit 2).
// Versions 1 and 2 (XXH64 per run, no identity) are refused: repack with this k3host.
//
// "layer_range" (pack-trunk --layers A-B): the layers packed, A..B inclusive; "layers" holds
// exactly those, in order. A whole trunk is [0, L-1] with its global runs; a partial pack
// (a range given) has no global runs: a run reads the layers outside the range and the
// global tensors raw from the shards, and the packed layers from trunk.bin, checked as
// ever. "n_layers" is the checkpoint's layer count; a range outside it is refused (exit
// 2). A version-3 trunk.json without "layer_range" (written before it) holds layers 0..n-1.
//
// "codec" (pack-trunk --codec bf16-zstd|bf16-huff; docs/streaming.md "Coded packed trunk"):
// a coded layer run also has "coded_bytes" (its length in trunk.bin; the run is padded to
// the next 4096 after it) and each of its tensors "coded_off" and "coded_bytes", its coded
// stream within the run (core/src/io/pack_trunk_codec.hpp). Global runs stay raw (embedding
// rows and lm_head chunks are read in pieces).
//
// Atomicity: pack_trunk (k3/pack_trunk.hpp, the writer) finishes a trunk in a temporary
// folder and writes trunk.json last, so a folder without a valid trunk.json is never a
// finished trunk and PackedTrunk::open refuses it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <k3/checkpoint.hpp>

namespace k3 {

namespace sdk {
class StorageBackend;
}

inline constexpr std::uint64_t kTrunkAlign = 4096;
inline constexpr std::uint64_t kTrunkTensorAlign = 64;

/// The codecs pack-trunk writes and PackedTrunk reads: "none" (the default: raw runs,
/// raw runs), "bf16-zstd" and "bf16-huff" (each BF16 tensor of a layer run in
/// blocks whose exponent bytes are coded by zstd or by k3host's Huffman coder; exact).
std::vector<std::string> trunk_codec_names();

struct PackedTensor {
  std::string name;
  DType dtype{};
  std::vector<std::uint64_t> shape;
  std::uint64_t offset = 0;  ///< within the run
  std::uint64_t nbytes = 0;
  std::uint64_t coded_offset = 0;  ///< within the coded run (coded runs only)
  std::uint64_t coded_bytes = 0;   ///< its coded stream's length; 0 in a raw run
  std::uint64_t xxh3 = 0;          ///< XXH3-64 of its (decoded) bytes
  std::int64_t row_sums = -1;      ///< index of its row 0's checksum in the row table; -1: none
  /// Bytes of one row (a tensor with row checksums is 2-D).
  [[nodiscard]] std::uint64_t row_bytes() const { return shape.empty() || shape[0] == 0 ? 0 : nbytes / shape[0]; }
};

struct PackedRun {
  std::int64_t layer = -1;  ///< -1 for a global run
  std::string name;         ///< "layer N", or the global tensor's name
  std::uint64_t file_offset = 0;
  std::uint64_t nbytes = 0;       ///< the (decoded) run's bytes
  std::uint64_t xxh3 = 0;         ///< XXH3-64 of the stored bytes
  std::uint64_t coded_bytes = 0;  ///< stored length of a coded run; 0 for a raw run
  std::vector<PackedTensor> tensors;
  [[nodiscard]] bool coded() const { return coded_bytes != 0; }
  /// Bytes the run's data takes in trunk.bin.
  [[nodiscard]] std::uint64_t stored_bytes() const { return coded() ? coded_bytes : nbytes; }
  /// Bytes the run occupies in trunk.bin (stored_bytes() rounded up to 4096).
  [[nodiscard]] std::uint64_t padded_bytes() const {
    return (stored_bytes() + kTrunkAlign - 1) / kTrunkAlign * kTrunkAlign;
  }
  /// nullptr when absent.
  [[nodiscard]] const PackedTensor* find(std::string_view tensor) const;
};

class PackedTrunk {
 public:
  /// Opens and validates `uri`/trunk.json against `uri`/trunk.bin, both read through
  /// `storage` (`uri` is a folder or a URL): schema, alignment, runs inside trunk.bin and
  /// not overlapping, tensors inside their runs with dtype × shape == nbytes, every layer
  /// of its layer range once (all layers 0..n-1 when it has no range), row checksums inside
  /// the row table, and the checkpoint identity equal to `expected_identity` (the run's
  /// model; `model` names it in the message) and, when `model_layers` >= 0, the range inside
  /// the model's layers 0..model_layers-1. Reads the row table and checks it against its
  /// XXH3-64. UsageError naming the file and the problem otherwise (RuntimeError for a
  /// damaged row table).
  static PackedTrunk open(sdk::StorageBackend& storage, const std::string& uri, std::uint64_t expected_identity,
                          std::string_view model = {}, std::int64_t model_layers = -1);

  [[nodiscard]] const std::string& uri() const noexcept { return uri_; }
  [[nodiscard]] std::string bin_uri() const;
  /// The checkpoint identity it was packed from.
  [[nodiscard]] std::uint64_t identity() const noexcept { return identity_; }
  [[nodiscard]] std::uint64_t bin_bytes() const noexcept { return bin_bytes_; }
  /// "none" or the codec of the layer runs.
  [[nodiscard]] const std::string& codec() const noexcept { return codec_; }
  /// The packed layers, first_layer()..last_layer() in order (layers()[i].layer ==
  /// first_layer() + i).
  [[nodiscard]] const std::vector<PackedRun>& layers() const noexcept { return layers_; }
  [[nodiscard]] std::int64_t first_layer() const noexcept { return layers_.empty() ? 0 : layers_.front().layer; }
  [[nodiscard]] std::int64_t last_layer() const noexcept { return layers_.empty() ? -1 : layers_.back().layer; }
  /// The checkpoint's layer count as trunk.json records it (-1 when it does not).
  [[nodiscard]] std::int64_t model_layers() const noexcept { return model_layers_; }
  /// Some layers only (pack-trunk --layers): the others and the globals are the shards'.
  [[nodiscard]] bool partial() const noexcept { return partial_; }
  [[nodiscard]] const std::vector<PackedRun>& globals() const noexcept { return globals_; }
  /// The row table: XXH3-64 of each row of the tensors that have row checksums.
  [[nodiscard]] const std::vector<std::uint64_t>& row_sums() const noexcept { return row_sums_; }
  /// The global run holding `tensor`, or nullptr.
  [[nodiscard]] const PackedRun* global(std::string_view tensor) const;

  /// Reads every run through `storage` and checks its XXH3-64, every tensor (decoded, for a
  /// coded run) against its own, and every row against the row table; RuntimeError naming
  /// the file and the first run that differs or does not decode.
  void verify_hashes(sdk::StorageBackend& storage) const;

 private:
  std::string uri_;
  std::uint64_t identity_ = 0;
  std::uint64_t bin_bytes_ = 0;
  std::string codec_ = "none";
  std::int64_t model_layers_ = -1;
  bool partial_ = false;
  std::vector<PackedRun> layers_;
  std::vector<PackedRun> globals_;
  std::vector<std::uint64_t> row_sums_;
};

}  // namespace k3
