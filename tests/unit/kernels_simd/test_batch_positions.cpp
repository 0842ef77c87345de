// A batch of n positions through any kernel set (scalar included) gives, for each position,
// exactly the bits of the scalar set's batch-1 call on that position alone (memcmp of the
// whole output, rows outside the range included). The sets tile positions in registers
// (plugins/kernels/common/position_tiles.hpp: avx2 and neon 4 positions at a time, avx512 8,
// scalar 8), so n runs over {1..9, 15, 16, 17, 31, 64}: every remainder of those tiles, with
// column counts covering every tail of 8 and of 32 and odd counts, row counts and partial
// row ranges that are not row-tile multiples, and finite, cancelling (partition-sensitive)
// and non-finite activations. Batches too long for the widened-activation buffer (chunks of
// positions, a last chunk of one, and rows so long that positions go one at a time) too.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

#include "operands.hpp"
#include "random_inputs.hpp"
#include "simd_sets.hpp"

namespace {

using k3::sdk::KernelSet;
using k3simd::Activations;
using k3simd::RandomInputs;
using k3simd::Shape;

constexpr std::size_t kBatches[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 64};

/// The scalar reference and every set under test: scalar itself and each runnable SIMD set.
struct Sets {
  std::shared_ptr<KernelSet> ref = k3simd::scalar_set();
  std::vector<k3simd::NamedSet> under_test;
  Sets() {
    under_test.push_back({"scalar", ref});
    for (auto& s : k3simd::runnable_simd_sets()) under_test.push_back(std::move(s));
  }
};

std::vector<float> activations(RandomInputs& rnd, const Shape& s, Activations kind) {
  switch (kind) {
    case Activations::finite: return rnd.floats(s.batch * s.cols);
    case Activations::cancelling: return k3simd::cancelling_activations(rnd, s.batch, s.cols);
    case Activations::with_nonfinite: return k3simd::nonfinite_activations(rnd, s.batch * s.cols);
  }
  return {};
}

/// The scalar set's batch-1 result for each position of s, in one [batch, rows] buffer.
template <class Kernel>
std::vector<float> one_position_at_a_time(const KernelSet& ref, Kernel&& kernel, const Shape& s,
                                          const std::vector<float>& x, std::uint64_t weight_seed, Activations kind) {
  std::vector<float> want = k3simd::poisoned(s.batch * s.rows);
  for (std::size_t b = 0; b < s.batch; ++b) {
    const Shape one{s.rows, s.cols, 1, s.range};
    const std::vector<float> xb(x.begin() + static_cast<std::ptrdiff_t>(b * s.cols),
                                x.begin() + static_cast<std::ptrdiff_t>((b + 1) * s.cols));
    std::vector<float> yb = k3simd::poisoned(s.rows);
    RandomInputs weights(weight_seed);  // the same weights for every call
    kernel(ref, weights, one, xb, yb, kind);
    std::copy(yb.begin(), yb.end(), want.begin() + static_cast<std::ptrdiff_t>(b * s.rows));
  }
  return want;
}

/// Checks shape s for every set; returns how many (set, shape) pairs were compared.
template <class Kernel>
std::size_t check_shape(const Sets& sets, const char* kernel_name, Kernel&& kernel, const Shape& s, Activations kind,
                        RandomInputs& rnd) {
  const std::vector<float> x = activations(rnd, s, kind);
  const std::uint64_t weight_seed = rnd.bits32();
  const std::vector<float> want = one_position_at_a_time(*sets.ref, kernel, s, x, weight_seed, kind);
  std::size_t compared = 0;
  for (const auto& [name, set] : sets.under_test) {
    std::vector<float> got = k3simd::poisoned(s.batch * s.rows);
    RandomInputs weights(weight_seed);
    kernel(*set, weights, s, x, got, kind);
    const bool same = kind == Activations::with_nonfinite ? k3simd::same_bits_or_both_nan(got, want)
                                                          : k3simd::same_bits(got, want);
    if (!same) {
      INFO(k3simd::describe(name, kernel_name, s) << " kind " << static_cast<int>(kind));
      CHECK(same);
    }
    ++compared;
  }
  return compared;
}

/// Every batch size against column counts with every tail of 8 and 32 and odd ones, row
/// counts 1..17 (not multiples of the row tiles), full and partial row ranges.
template <class Kernel>
void compare_batches(const char* kernel_name, Kernel&& kernel) {
  const Sets sets;
  const std::size_t cols_list[] = {1, 5, 8, 13, 31, 32, 33, 63, 64, 70, 97, 257, 1025, 3585};
  const std::size_t rows_list[] = {1, 2, 3, 5, 7, 9, 13, 17};
  RandomInputs rnd(0xba7c4000u + std::strlen(kernel_name));
  std::size_t compared = 0;
  for (Activations kind : {Activations::finite, Activations::cancelling, Activations::with_nonfinite}) {
    std::size_t i = 0;
    for (std::size_t batch : kBatches) {
      for (std::size_t cols : cols_list) {
        const std::size_t rows = rows_list[i++ % std::size(rows_list)];
        const std::size_t begin = i % 2 == 0 ? 0 : rnd.below(static_cast<unsigned>(rows));
        const std::size_t end = i % 2 == 0 ? rows : begin + 1 + rnd.below(static_cast<unsigned>(rows - begin));
        compared += check_shape(sets, kernel_name, kernel, {rows, cols, batch, {begin, end}}, kind, rnd);
      }
    }
  }
  CHECK(compared >= 3 * std::size(kBatches) * std::size(cols_list));
}

/// Rows so long that the activations of the whole batch do not fit the buffer the sets
/// widen them into (2^20 doubles, common/widened_activations.hpp): 131075 columns hold 7
/// positions per chunk (batch 9: chunks of 7 and 2; batch 8: 7, then 1 through the batch-1
/// kernel); 600001 columns not even 2 (every position through the batch-1 kernel).
template <class Kernel>
void compare_long_rows(const char* kernel_name, Kernel&& kernel) {
  const Sets sets;
  RandomInputs rnd(0x10b6b47cu + std::strlen(kernel_name));
  for (const Shape& s : {Shape{5, 131075, 9, {0, 5}}, Shape{5, 131075, 8, {1, 4}}, Shape{3, 600001, 3, {1, 3}}})
    CHECK(check_shape(sets, kernel_name, kernel, s, Activations::finite, rnd) == sets.under_test.size());
}

}  // namespace

TEST_CASE("bf16: batch n of every set equals scalar batch 1 per position, bit for bit", "[kernels_simd][batch]") {
  compare_batches("matmul_bf16", k3simd::run_bf16);
}

TEST_CASE("f32: batch n of every set equals scalar batch 1 per position, bit for bit", "[kernels_simd][batch]") {
  compare_batches("matmul_f32", k3simd::run_f32);
}

TEST_CASE("MXFP4: batch n of every set equals scalar batch 1 per position, bit for bit", "[kernels_simd][batch]") {
  compare_batches("matmul_mxfp4", k3simd::run_mxfp4);
}

TEST_CASE("batches whose activations overflow the widening buffer equal scalar batch 1 per position",
          "[kernels_simd][batch]") {
  compare_long_rows("matmul_bf16", k3simd::run_bf16);
  compare_long_rows("matmul_f32", k3simd::run_f32);
  compare_long_rows("matmul_mxfp4", k3simd::run_mxfp4);
}
