// An approximate copy of a MoE layer's router (gate [experts, E] and its selection bias),
// small enough to stay resident for every streamed layer, so the router lookahead can
// predict a layer whose weights are not in memory yet (docs/cache.md, "Router-lookahead
// prefetch"). Prediction only chooses what to read early: the layer itself still routes
// with its exact router, so no output bit depends on this copy.
//
// Each expert's row is quantised symmetrically with one fp32 scale: int8 (q in -127..127,
// scale = max|w| / 127) or int4 (q in -7..7, two per byte, scale = max|w| / 7).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "maths/ops.hpp"

namespace k3::maths {

class RouterCopy {
 public:
  /// Room for a router of `experts` rows of `cols` at `bits` (8 or 4), allocated now, filled
  /// by assign(): a streamed trunk sizes every copy at load, so a pass allocates nothing. It
  /// holds exactly k3::router_copy_bytes(experts, cols, bits), the plan's figure.
  RouterCopy(std::size_t experts, std::size_t cols, int bits);

  /// Quantises `gate` (rows() x cols(), bf16 or fp32) and copies `bias` (rows() floats).
  void assign(const Matrix& gate, const float* bias);
  [[nodiscard]] bool filled() const noexcept { return filled_; }

  /// logits [T, rows()] ≈ gate · x [T, cols()] (dequantised products, fp32 sums: advisory).
  void logits(const float* x, std::size_t T, float* out) const noexcept;
  [[nodiscard]] const float* bias() const noexcept { return bias_.data(); }
  [[nodiscard]] std::size_t rows() const noexcept { return rows_; }
  [[nodiscard]] std::size_t cols() const noexcept { return cols_; }
  [[nodiscard]] int bits() const noexcept { return bits_; }

 private:
  std::size_t rows_, cols_;
  int bits_;
  std::size_t row_bytes_;
  std::vector<std::int8_t> q_;  ///< int8: one per weight; int4: two per byte, low nibble first
  std::vector<float> scale_, bias_;
  bool filled_ = false;
};

}  // namespace k3::maths
