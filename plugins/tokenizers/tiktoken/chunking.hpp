// The cut Kimi's tokenization_kimi.py makes before tiktoken sees the text (arch-refs §9):
// the text is cut into pieces of at most `max_chunk_chars` code points, and each piece into
// substrings so that no run of consecutive whitespace (Python str.isspace) or
// non-whitespace code points is longer than `max_run_chars`. Each substring is then
// encoded on its own, so the cuts change ids only for texts longer than the limits.
#pragma once
#include <cstddef>
#include <string_view>
#include <vector>

namespace k3::tiktoken {

struct ChunkLimits {
  std::size_t max_chunk_chars = 0;  ///< 0: no cut (tiktoken itself); Kimi: 400000
  std::size_t max_run_chars = 0;    ///< 0: no cut; Kimi: 25000
};

/// Appends the substrings of `text` (valid UTF-8) in order; they concatenate to `text`.
/// An empty text gives no substring.
void split_for_encoding(std::string_view text, const ChunkLimits& limits, std::vector<std::string_view>& out);

}  // namespace k3::tiktoken
