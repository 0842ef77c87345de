#include "maths/ops.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "maths/row_blocks.hpp"

namespace k3::maths {

void Matrix::row(std::size_t r, float* out) const noexcept {
  if (f32) {
    std::memcpy(out, fp32() + r * cols, cols * sizeof(float));
    return;
  }
  const std::uint16_t* src = bf16() + r * cols;
  for (std::size_t c = 0; c < cols; ++c) out[c] = bf16_to_f32(src[c]);
}

void Ops::matmul(const Matrix& w, const float* x, std::size_t batch, float* y) const {
  if (w.f32)
    for_row_blocks(w.rows, threads_, [&](sdk::RowRange r) { k_.matmul_f32(w.fp32(), w.rows, w.cols, r, x, batch, y); });
  else
    for_row_blocks(w.rows, threads_,
                   [&](sdk::RowRange r) { k_.matmul_bf16(w.bf16(), w.rows, w.cols, r, x, batch, y); });
}

void Ops::matmul(const sdk::Mxfp4Matrix& w, const float* x, std::size_t batch, float* y) const {
  for_row_blocks(w.rows, threads_, [&](sdk::RowRange r) { k_.matmul_mxfp4(w, r, x, batch, y); });
}

void Ops::rmsnorm(const float* x, const float* w, double eps, std::size_t n, float* y) const noexcept {
  const double ss = dot(x, x, n);
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (std::size_t i = 0; i < n; ++i) y[i] = static_cast<float>(double{w[i]} * (double{x[i]} * inv));
}

void softmax64(std::span<double> scores) noexcept {
  double m = -std::numeric_limits<double>::infinity();
  for (double s : scores) m = std::max(m, s);
  double z = 0;
  for (double& s : scores) {
    s = std::exp(s - m);
    z += s;
  }
  for (double& s : scores) s /= z;
}

}  // namespace k3::maths
