// Rank BPE exactly as tiktoken's byte_pair_encode: within one pre-token piece, repeatedly
// merge the adjacent pair whose concatenated bytes have the lowest rank (the leftmost such
// pair on ties) until no adjacent pair is a token; the parts' ranks are the ids.
//
// Short pieces use tiktoken's own O(n·m) scan over a parts vector (fast for the usual few
// bytes); long pieces use a min-heap over a linked list, O(n log n), which performs the
// same merges in the same order (the heap is keyed by (rank, start), i.e. lowest rank,
// then leftmost), so a megabyte of punctuation does not take minutes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "rank_table.hpp"

namespace k3::tiktoken {

/// Reusable buffers so encoding a text allocates once, not per piece. One per thread.
struct BpeScratch {
  std::vector<std::uint32_t> starts;  ///< part boundaries (byte offsets)
  std::vector<Rank> ranks;            ///< rank of the pair starting at each part
  std::vector<std::uint32_t> next;    ///< heap variant: linked list
  std::vector<std::uint32_t> prev;
  std::vector<std::uint64_t> heap;  ///< (rank << 32 | start) min-heap entries
};

/// Pieces at least this long take the heap path.
inline constexpr std::size_t kHeapBpeMinBytes = 64;

/// Appends the ids of `piece` (non-empty) to `out`. A piece that is itself a token is that
/// one id (tiktoken checks this first). Throws TokenizerError when a byte of the piece has no
/// rank (the rank file does not cover all 256 bytes).
void byte_pair_encode(const RankTable& ranks, std::string_view piece, BpeScratch& scratch,
                      std::vector<std::uint32_t>& out);

}  // namespace k3::tiktoken
