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

int Ops::threads_for(std::size_t items, std::size_t work) const noexcept {
  if (items < 2 || work < min_parallel_work_) return 1;
  return static_cast<int>(std::min<std::size_t>(items, static_cast<std::size_t>(threads_)));
}

// A product's threads: one below min_parallel_work multiply-adds, where waking a sleeping
// thread costs more than it saves (a small model's 128 x 128 matrix is ~3 us of work, a
// wake-up here 10-30 us). Row blocks are the same whichever thread runs them, so the choice
// never changes a bit.
void Ops::matmul(const Matrix& w, const float* x, std::size_t batch, float* y) const {
  const int threads = threads_for(w.rows, w.rows * w.cols * std::max<std::size_t>(batch, 1));
  if (w.f32)
    for_row_blocks(w.rows, threads, [&](sdk::RowRange r) { k_.matmul_f32(w.fp32(), w.rows, w.cols, r, x, batch, y); });
  else
    for_row_blocks(w.rows, threads, [&](sdk::RowRange r) { k_.matmul_bf16(w.bf16(), w.rows, w.cols, r, x, batch, y); });
}

void Ops::matmul(const sdk::Mxfp4Matrix& w, const float* x, std::size_t batch, float* y) const {
  for_row_blocks(w.rows, threads_for(w.rows, w.rows * w.cols * std::max<std::size_t>(batch, 1)),
                 [&](sdk::RowRange r) { k_.matmul_mxfp4(w, r, x, batch, y); });
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
