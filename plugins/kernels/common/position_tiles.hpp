// Register tiling over positions (batch rows), shared by the SIMD sets.
//
// Why: a call with batch n (speculative-draft verification, prefill) multiplies every weight
// by n activations. Looping the whole batch-1 kernel n times decodes each weight (bf16
// widening, MXFP4 nibble lookup) and loads it n times. A tile of R rows x B positions
// instead decodes each 8-weight block of its R rows once and multiplies it into the B
// positions' activations, with R x B independent accumulators in registers. Each (row,
// position) accumulator sees exactly the additions of the batch-1 kernel, in the same
// order, so every output keeps its bits: tiling changes which outputs are computed side
// by side, never how one is computed.
//
// The activations of all positions are widened to fp64 once per call, each position's row
// zero-padded to whole blocks, so a tail block reads +0 past the last column and adds
// 0·0 = +0, which leaves an accumulator unchanged. They are laid out in panels, one per
// position tile, block-major (widened_panels): the B positions' activations of one block
// of 8 columns are 8·B consecutive doubles, so the tile reads one sequential stream off one
// pointer with constant offsets instead of B streams that need B address registers.
#pragma once
#include <cstddef>

#include "widened_activations.hpp"

namespace k3::kernels {

/// Rows per pass: the tiles of all positions run over kPassRows rows before the next rows.
/// One position tile's panel holds 4..8 positions x cols doubles (229 KiB for 4 x 7168), so
/// the panels of all positions do not fit in L2 beside the streaming weights; a pass keeps
/// one panel and its rows' weights (8 rows: 115 KiB of bf16 at 7168 columns) in L2, and only
/// the first position tile of a pass reads the weights from memory. Measured on Zen 3 with
/// avx2, 8 positions: 3072x7168 bf16 and MXFP4 ~15% faster than all positions per row.
/// (Splitting the columns into chunks whose panel part stays in L1 was tried too: no gain
/// at these shapes, and the per-chunk overhead cost 20% when the matrix sat in cache.)
inline constexpr std::size_t kPassRows = 8;

/// Rows [r0, r1) x the Bt positions from p: rows R at a time, the rest one at a time.
template <std::size_t R, std::size_t Bt, class Tile>
inline void tile_rows(Tile& tile, std::size_t r0, std::size_t r1, std::size_t p) {
  std::size_t r = r0;
  for (; r + R <= r1; r += R) tile.template operator()<R, Bt>(r, p);
  for (; r < r1; ++r) tile.template operator()<1, Bt>(r, p);
}

/// Rows [r0, r1) x the last `left` (< B) positions from p, as tiles of exactly `left`.
template <std::size_t R, std::size_t B, class Tile>
inline void positions_left(Tile& tile, std::size_t r0, std::size_t r1, std::size_t p, std::size_t left) {
  if constexpr (B > 1) {
    if (left == B - 1)
      tile_rows<R, B - 1>(tile, r0, r1, p);
    else
      positions_left<R, B - 1>(tile, r0, r1, p, left);
  }
}

/// Calls tile.operator()<Rt, Bt>(r, p) for tiles covering rows [begin, end) x positions
/// [0, positions): in passes of kPassRows rows; within a pass, positions B at a time (the
/// rest as one narrower tile), rows R at a time (the rest one at a time).
template <std::size_t R, std::size_t B, class Tile>
inline void for_each_tile(std::size_t begin, std::size_t end, std::size_t positions, Tile&& tile) {
  for (std::size_t r0 = begin; r0 < end; r0 += kPassRows) {
    const std::size_t r1 = end - r0 < kPassRows ? end : r0 + kPassRows;
    std::size_t p = 0;
    for (; p + B <= positions; p += B) tile_rows<R, B>(tile, r0, r1, p);
    if (p < positions) positions_left<R, B>(tile, r0, r1, p, positions - p);
  }
}

/// Activations x [n, cols] widened to fp64 in panels for position tiles of `tile`
/// (for_each_tile's: whole tiles, then one narrower tile of the rest). The panel of the tile
/// starting at position p (width w positions) starts at xw + p * stride; in it, column c of
/// the tile's j-th position is at ((c / 8) * w + j) * 8 + c % 8 (panel_block). Columns
/// cols..stride-1 are +0. Null as widened_buffer.
inline const double* widened_panels(const float* x, std::size_t n, std::size_t cols, std::size_t stride,
                                    std::size_t tile) noexcept {
  double* out = widened_buffer(n * stride);
  if (out == nullptr) return nullptr;
  for (std::size_t p0 = 0; p0 < n; p0 += tile) {
    const std::size_t width = n - p0 < tile ? n - p0 : tile;
    double* panel = out + p0 * stride;
    for (std::size_t j = 0; j < width; ++j) {
      const float* xp = x + (p0 + j) * cols;
      for (std::size_t c = 0; c < stride; ++c) panel[((c / 8) * width + j) * 8 + c % 8] = c < cols ? xp[c] : 0.0;
    }
  }
  return out;
}

/// The 8 doubles of column block k (columns 8k..8k+7) of position j in a panel of B positions.
template <std::size_t B>
inline const double* panel_block(const double* panel, std::size_t k, std::size_t j) noexcept {
  return panel + (k * B + j) * 8;
}

/// Runs `tiled(xw, first, count)` over positions [0, batch) in as few chunks as the widened
/// buffer holds (one chunk for any real batch: 64 positions of 16384 columns fit), with xw
/// the chunk's activations widened into panels of `tile` positions, padded to `stride`
/// (a multiple of 8). Where not even two positions fit, or the buffer cannot grow,
/// `single(first, count)` runs those positions through the batch-1 kernel instead (the
/// same bits).
template <class Tiled, class Single>
inline void over_widened_positions(const float* x, std::size_t batch, std::size_t cols, std::size_t stride,
                                   std::size_t tile, Tiled&& tiled, Single&& single) {
  const std::size_t most = widened_positions_max(stride);
  std::size_t p = 0;
  while (p < batch) {
    std::size_t n = batch - p < most ? batch - p : most;
    const double* xw = n >= 2 ? widened_panels(x + p * cols, n, cols, stride, tile) : nullptr;
    if (xw == nullptr) {
      n = n == 0 ? 1 : n;
      single(p, n);
    } else {
      tiled(xw, p, n);
    }
    p += n;
  }
}

/// n rounded up to a multiple of `unit`.
inline constexpr std::size_t round_up(std::size_t n, std::size_t unit) noexcept { return (n + unit - 1) / unit * unit; }

}  // namespace k3::kernels
