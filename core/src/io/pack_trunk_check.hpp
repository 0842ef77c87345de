// Checking bytes read from a packed trunk's trunk.bin before the model uses them: every
// tensor against the XXH3-64 trunk.json records for it, and the tensors read in pieces (the
// embedding's rows, row chunks of lm_head and of a split dense layer's FFN) row by row
// against the row table (k3/packed_trunk.hpp). The readers call these on the thread that read
// the bytes (the ring's and the row chunks' reader threads, so the hashing overlaps the
// compute), before the bytes are published. A mismatch is a RuntimeError (exit 1) naming
// trunk.bin, the run, the tensor and the offset.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace k3::io::trunk_check {

/// What a packed trunk says one tensor's bytes hash to.
struct TensorCheck {
  std::string file;                     ///< trunk.bin's URI
  std::string run;                      ///< "layer 3", or the global tensor's name
  std::string tensor;                   ///< the tensor's name
  std::uint64_t offset = 0;             ///< of the tensor's bytes (its coded stream, when coded) in trunk.bin
  bool coded = false;                   ///< its bytes are decoded from a coded stream
  std::uint64_t xxh3 = 0;               ///< of its (decoded) bytes
  std::span<const std::uint64_t> rows;  ///< its rows' checksums; empty when it has none
  std::uint64_t row_bytes = 0;

  /// Checks the whole tensor (`n` bytes at `data`).
  void whole(const std::byte* data, std::uint64_t n) const;
  /// Checks a digest of the whole tensor (`n` bytes) computed by the caller, in pieces.
  void digest_is(std::uint64_t h, std::uint64_t n) const;
  /// Checks rows [first, first + count) at `data` (the first of them at data[0]).
  /// RuntimeError when the tensor has no row checksums (a damaged trunk.json).
  void rows_at(const std::byte* data, std::uint64_t first, std::uint64_t count) const;
};

/// XXH3-64 (seed 0) of n bytes.
std::uint64_t digest(const void* data, std::uint64_t n) noexcept;

}  // namespace k3::io::trunk_check
