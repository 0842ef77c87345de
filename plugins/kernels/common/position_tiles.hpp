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

/// Runs the tile of the last `left` (< B) positions from p as tile<R, left>.
template <std::size_t R, std::size_t B, class Tile>
inline void positions_left(Tile& tile, std::size_t r, std::size_t p, std::size_t left) {
  if constexpr (B > 1) {
    if (left == B - 1) tile.template operator()<R, B - 1>(r, p);
    else positions_left<R, B - 1>(tile, r, p, left);
  }
}

/// Rows [r, r + R) over positions [0, positions): B at a time, the rest as one smaller tile.
template <std::size_t R, std::size_t B, class Tile>
inline void tile_positions(Tile& tile, std::size_t r, std::size_t positions) {
  std::size_t p = 0;
  for (; p + B <= positions; p += B) tile.template operator()<R, B>(r, p);
  if (p < positions) positions_left<R, B>(tile, r, p, positions - p);
}

/// Calls tile.operator()<Rt, Bt>(r, p) for tiles covering rows [begin, end) x positions
/// [0, positions): rows R at a time (the rest one at a time), positions inside rows, so a
/// tile of weights is fetched from memory once for all positions.
template <std::size_t R, std::size_t B, class Tile>
inline void for_each_tile(std::size_t begin, std::size_t end, std::size_t positions, Tile&& tile) {
  std::size_t r = begin;
  for (; r + R <= end; r += R) tile_positions<R, B>(tile, r, positions);
  for (; r < end; ++r) tile_positions<1, B>(tile, r, positions);
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
