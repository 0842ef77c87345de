// AttnRes aggregation (docs/model-spec.md §3 "AttnRes aggregation"):
//   K_r = V_r / sqrt(mean(V_r²)+ε); score_r = Σ_d K_r[d]·norm_w[d]·proj_w[d];
//   p = softmax(score); out = Σ_r p_r·V_r  (raw rows, no temperature).
// Here: fold[d] = norm_w[d]·proj_w[d] in fp64 (exact: a product of two fp32 values), the score is
// inv_r · Σ_d V_r[d]·fold[d] with the contract's 8-way fp64 partition, and the output sum
// runs over rows in order in fp64, rounded once.
#include <cmath>

#include "maths/blocks/blocks.hpp"

namespace k3::maths {
namespace {

/// Σ a[i]·b[i] with fp32 a and fp64 b, in the contract's partition and tree.
double dot_f32_f64(const float* a, const double* b, std::size_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (std::size_t i = 0; i < n; ++i) acc[i % 8] += double{a[i]} * b[i];
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

}  // namespace

void attn_res(const Ops& ops, std::span<const float* const> rows, const float* norm_w, const float* proj_w, double eps,
              std::size_t E, float* out, AttnResBuffers& b) {
  double* fold = b.fold.data();
  for (std::size_t d = 0; d < E; ++d) fold[d] = double{norm_w[d]} * double{proj_w[d]};
  double* score = b.scores.data();
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const double inv = 1.0 / std::sqrt(ops.dot(rows[r], rows[r], E) / static_cast<double>(E) + eps);
    score[r] = inv * dot_f32_f64(rows[r], fold, E);
  }
  softmax64({score, rows.size()});
  for (std::size_t d = 0; d < E; ++d) {
    double acc = 0;
    for (std::size_t r = 0; r < rows.size(); ++r) acc += score[r] * double{rows[r][d]};
    out[d] = static_cast<float>(acc);
  }
}

}  // namespace k3::maths
