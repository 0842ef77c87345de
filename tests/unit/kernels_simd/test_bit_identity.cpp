// Every kernel of every SIMD set that can run here equals the scalar set bit for bit
// (memcmp of the whole output, including the rows outside the range, which must be left
// alone) on random operands over many shapes: every column count 1..70 (all tails of 8 and
// 32), odd larger sizes, 1..17 rows (every remainder of the row tiles: avx512 runs dense and
// MXFP4 rows 8 at a time, avx2 4 at a time), batch 1..5, partial row ranges; MXFP4 with scale
// bytes 0, 1, 252..254 and 255 and random padding nibbles, and with more activations than
// the SIMD sets widen to fp64 up front (they then convert them as they go).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "operands.hpp"
#include "random_inputs.hpp"
#include "simd_sets.hpp"

namespace {

using k3simd::Activations;
using k3simd::cancelling_activations;
using k3simd::describe;
using k3simd::nonfinite_activations;
using k3simd::pair_weights;
using k3simd::poisoned;
using k3simd::RandomInputs;
using k3simd::run_bf16;
using k3simd::run_f32;
using k3simd::run_mxfp4;
using k3simd::same_bits;
using k3simd::same_bits_or_both_nan;
using k3simd::Shape;

/// Column counts: every tail of 8 and of 32, then odd and awkward larger sizes.
std::vector<std::size_t> column_counts() {
  std::vector<std::size_t> out;
  for (std::size_t n = 1; n <= 70; ++n) out.push_back(n);
  for (std::size_t n : {71, 97, 127, 128, 129, 255, 257, 511, 1000, 1023, 1025, 3583, 3585, 7175}) out.push_back(n);
  return out;
}

/// Row counts: one full tile plus every remainder for tiles of 4, 6 and 8, and a few tiles.
std::vector<std::size_t> row_counts() { return {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 17}; }

/// A few shapes per column count: 1..17 rows, batch 1..5, full and partial row ranges.
std::vector<Shape> shapes(RandomInputs& rnd) {
  std::vector<Shape> out;
  for (std::size_t cols : column_counts()) {
    for (std::size_t rows : row_counts()) {
      const std::size_t batch = 1 + (cols + rows) % 5;
      out.push_back({rows, cols, batch, {0, rows}});
      const std::size_t begin = rnd.below(static_cast<unsigned>(rows));
      const std::size_t end = begin + 1 + rnd.below(static_cast<unsigned>(rows - begin));
      out.push_back({rows, cols, 1 + rnd.below(5), {begin, end}});
    }
  }
  return out;
}

/// Runs `kernel` through scalar and through every runnable SIMD set on the same inputs and
/// counts the shapes whose outputs differ (each mismatch is reported with its shape).
template <class Kernel>
void compare_all_shapes(const char* kernel_name, Activations kind, Kernel&& kernel) {
  const auto ref = k3simd::scalar_set();
  const auto sets = k3simd::runnable_simd_sets();
  RandomInputs rnd(0x5eed0000u + std::strlen(kernel_name) + 7 * static_cast<unsigned>(kind));
  std::size_t compared = 0;
  for (const Shape& s : shapes(rnd)) {
    std::vector<float> x = kind == Activations::finite       ? rnd.floats(s.batch * s.cols)
                           : kind == Activations::cancelling ? cancelling_activations(rnd, s.batch, s.cols)
                                                             : nonfinite_activations(rnd, s.batch * s.cols);
    const std::uint64_t operand_seed = rnd.bits32();
    std::vector<float> want = poisoned(s.batch * s.rows);
    {
      RandomInputs weights(operand_seed);
      kernel(*ref, weights, s, x, want, kind);
    }
    for (const auto& [name, set] : sets) {
      std::vector<float> got = poisoned(s.batch * s.rows);
      RandomInputs weights(operand_seed);  // the same weights for every set
      kernel(*set, weights, s, x, got, kind);
      const bool same = kind == Activations::with_nonfinite ? same_bits_or_both_nan(got, want) : same_bits(got, want);
      if (!same) {
        INFO(describe(name, kernel_name, s));
        CHECK(same);
      }
      ++compared;
    }
  }
  if (!sets.empty()) CHECK(compared > 0);
}

/// dot_f32 over every length 0..300 and some long odd ones, as an fp64 bit pattern.
template <class MakeA, class MakeB>
void compare_dots(MakeA&& make_a, MakeB&& make_b) {
  const auto ref = k3simd::scalar_set();
  const auto sets = k3simd::runnable_simd_sets();
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n <= 300; ++n) lengths.push_back(n);
  for (std::size_t n : {1023, 1025, 7167, 12289}) lengths.push_back(n);
  RandomInputs rnd(0xd07d07u);
  for (std::size_t n : lengths) {
    const std::vector<float> a = make_a(rnd, n);
    const std::vector<float> b = make_b(rnd, n);
    const double want = ref->dot_f32(a.data(), b.data(), n);
    // A norm's sum of squares passes the same pointer twice.
    const double want_sq = ref->dot_f32(a.data(), a.data(), n);
    for (const auto& [name, set] : sets) {
      const double got = set->dot_f32(a.data(), b.data(), n);
      const double got_sq = set->dot_f32(a.data(), a.data(), n);
      INFO(name << ".dot_f32 n " << n << " want " << want << " got " << got);
      const auto bits = [](double d) {
        std::uint64_t u;
        std::memcpy(&u, &d, sizeof u);
        return u;
      };
      if (std::isnan(want) || std::isnan(got)) {
        CHECK((std::isnan(want) && std::isnan(got)));
      } else {
        CHECK(bits(got) == bits(want));
      }
      CHECK(bits(got_sq) == bits(want_sq));
    }
  }
}

}  // namespace

TEST_CASE("bf16 matmul of every SIMD set equals scalar bit for bit", "[kernels_simd][bf16]") {
  compare_all_shapes("matmul_bf16", Activations::finite, run_bf16);
  compare_all_shapes("matmul_bf16", Activations::cancelling, run_bf16);
}

TEST_CASE("fp32 matmul of every SIMD set equals scalar bit for bit", "[kernels_simd][f32]") {
  compare_all_shapes("matmul_f32", Activations::finite, run_f32);
  compare_all_shapes("matmul_f32", Activations::cancelling, run_f32);
}

TEST_CASE("MXFP4 matmul of every SIMD set equals scalar bit for bit", "[kernels_simd][mxfp4]") {
  compare_all_shapes("matmul_mxfp4", Activations::finite, run_mxfp4);
  compare_all_shapes("matmul_mxfp4", Activations::cancelling, run_mxfp4);
}

TEST_CASE("MXFP4 matmul with a very long batch of activations equals scalar bit for bit", "[kernels_simd][mxfp4]") {
  // batch x cols = 8 x 131075 > 2^20 doubles: past what the SIMD sets widen up front
  // (common/widened_activations.hpp), so their other path (converting the activations as
  // they go) runs, and the groups cross many of avx512's 64-group scale chunks.
  const auto ref = k3simd::scalar_set();
  const auto sets = k3simd::runnable_simd_sets();
  RandomInputs rnd(0x10b6u);
  for (const Shape& s : {Shape{9, 131075, 8, {0, 9}}, Shape{9, 131075, 8, {3, 8}}}) {
    const std::vector<float> x = rnd.floats(s.batch * s.cols);
    const std::uint64_t operand_seed = rnd.bits32();
    std::vector<float> want = poisoned(s.batch * s.rows);
    {
      RandomInputs weights(operand_seed);
      run_mxfp4(*ref, weights, s, x, want, Activations::finite);
    }
    for (const auto& [name, set] : sets) {
      std::vector<float> got = poisoned(s.batch * s.rows);
      RandomInputs weights(operand_seed);
      run_mxfp4(*set, weights, s, x, got, Activations::finite);
      INFO(describe(name, "matmul_mxfp4", s));
      CHECK(same_bits(got, want));
    }
  }
}

TEST_CASE("dot_f32 of every SIMD set equals scalar bit for bit", "[kernels_simd][dot]") {
  const auto plain = [](RandomInputs& rnd, std::size_t n) { return rnd.floats(n); };
  compare_dots(plain, plain);
  // Cancelling pairs: a gets equal values at each pair, b the big opposite ones.
  compare_dots(
      [](RandomInputs& rnd, std::size_t n) {
    std::vector<float> v = rnd.floats(n);
    pair_weights(v, 1, n);
    return v;
      },
      [](RandomInputs& rnd, std::size_t n) { return cancelling_activations(rnd, 1, n); });
}

TEST_CASE("inf and NaN activations give the scalar result (NaN where scalar gives NaN)", "[kernels_simd][nonfinite]") {
  // Includes MXFP4 groups with scale byte 255: their weights are ±0, and 0·inf is NaN in
  // the scalar set, so it must be NaN in every set.
  compare_all_shapes("matmul_bf16", Activations::with_nonfinite, run_bf16);
  compare_all_shapes("matmul_f32", Activations::with_nonfinite, run_f32);
  compare_all_shapes("matmul_mxfp4", Activations::with_nonfinite, run_mxfp4);
  compare_dots(nonfinite_activations, nonfinite_activations);
}
