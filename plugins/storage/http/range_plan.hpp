// How a batch of reads becomes HTTP range requests (pure, so tests can check it alone).
//
// Each request's bytes inside the file are cut into pieces of at most `max_range` bytes
// (so one large read goes out over several connections at once). Pieces are then sorted
// by offset and merged into ranges: a piece joins the previous range when it starts at most
// `gap` bytes after the range's end (the gap bytes are fetched and dropped) and the merged
// range stays within `max_range` bytes. Overlapping pieces (two requests for the same bytes)
// share one range. A range is the inclusive byte interval sent as "Range: bytes=first-last".
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace k3::storage::http {

struct Piece {
  std::size_t request = 0;   ///< index of the request in the batch
  std::uint64_t offset = 0;  ///< file offset of the piece's first byte
  std::uint64_t length = 0;  ///< > 0
  std::byte* dest = nullptr;
  [[nodiscard]] std::uint64_t end() const noexcept { return offset + length; }
};

struct Range {
  std::uint64_t first = 0;    ///< first byte (inclusive)
  std::uint64_t end = 0;      ///< one past the last byte
  std::vector<Piece> pieces;  ///< sorted by offset, each inside [first, end)
  [[nodiscard]] std::uint64_t length() const noexcept { return end - first; }
};

/// Appends the pieces of request `index` ([offset, offset + length), length > 0).
inline void cut_pieces(std::size_t index, std::uint64_t offset, std::uint64_t length, std::byte* dest,
                       std::uint64_t max_range, std::vector<Piece>& out) {
  for (std::uint64_t done = 0; done < length;) {
    const std::uint64_t n = std::min(length - done, max_range);
    out.push_back({index, offset + done, n, dest + done});
    done += n;
  }
}

/// Merges pieces into ranges (see the header comment). `max_range` >= 1.
inline std::vector<Range> plan_ranges(std::vector<Piece> pieces, std::uint64_t gap, std::uint64_t max_range) {
  std::stable_sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
  std::vector<Range> out;
  for (const Piece& p : pieces) {
    if (!out.empty()) {
      Range& last = out.back();
      const std::uint64_t merged_end = std::max(last.end, p.end());
      if (p.offset <= last.end + gap && merged_end - last.first <= max_range) {
        last.end = merged_end;
        last.pieces.push_back(p);
        continue;
      }
    }
    out.push_back({p.offset, p.end(), {p}});
  }
  return out;
}

/// Copies the bytes [at, at + n) of the file, held in `data`, into every piece of `range`
/// they overlap. `cursor` (start at 0) skips pieces already complete; bytes must arrive in
/// order.
inline void scatter(const Range& range, std::size_t& cursor, std::uint64_t at, const std::byte* data,
                    std::uint64_t n) noexcept {
  const std::uint64_t end = at + n;
  while (cursor < range.pieces.size() && range.pieces[cursor].end() <= at) ++cursor;
  for (std::size_t j = cursor; j < range.pieces.size() && range.pieces[j].offset < end; ++j) {
    const Piece& p = range.pieces[j];
    const std::uint64_t from = std::max(at, p.offset);
    const std::uint64_t to = std::min(end, p.end());
    if (from < to) std::copy(data + (from - at), data + (to - at), p.dest + (from - p.offset));
  }
}

}  // namespace k3::storage::http
