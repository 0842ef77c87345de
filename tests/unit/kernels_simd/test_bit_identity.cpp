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

#include "random_inputs.hpp"
#include "simd_sets.hpp"

namespace {

using k3::sdk::KernelSet;
using k3::sdk::Mxfp4Matrix;
using k3::sdk::RowRange;
using k3simd::RandomInputs;

struct Shape {
  std::size_t rows;
  std::size_t cols;
  std::size_t batch;
  RowRange range;
};

std::string describe(const std::string& set, const char* kernel, const Shape& s) {
  std::ostringstream os;
  os << set << "." << kernel << " rows " << s.rows << " cols " << s.cols << " batch " << s.batch << " range ["
     << s.range.begin << ", " << s.range.end << ")";
  return os.str();
}

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

/// Output buffers start as a NaN pattern neither set would compute, so a write outside
/// the range, or a missing write inside it, shows up in the comparison.
std::vector<float> poisoned(std::size_t n) {
  return std::vector<float>(n, RandomInputs::from_bits(0x7FC0DEADu));
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// Bit identity, except that two NaNs count as equal: IEEE 754 leaves the payload and sign
/// of a NaN result unspecified and compilers commute additions freely, so the contract
/// (sdk/k3/kernels.hpp) promises bit identity for finite inputs and NaN-ness otherwise.
bool same_bits_or_both_nan(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (RandomInputs::to_bits(a[i]) != RandomInputs::to_bits(b[i])) return false;
  }
  return true;
}

/// Activations with inf, -inf and NaN sprinkled in (about 1 in 12).
std::vector<float> nonfinite_activations(RandomInputs& rnd, std::size_t n) {
  std::vector<float> x = rnd.floats(n);
  for (auto& v : x) {
    const unsigned k = rnd.below(36);
    if (k == 0) v = std::numeric_limits<float>::infinity();
    if (k == 1) v = -std::numeric_limits<float>::infinity();
    if (k == 2) v = std::numeric_limits<float>::quiet_NaN();
  }
  return x;
}

struct Mxfp4Data {
  std::vector<std::uint8_t> packed;
  std::vector<std::uint8_t> scales;
  Mxfp4Matrix view(std::size_t rows, std::size_t cols) const { return {packed.data(), scales.data(), rows, cols}; }
};

Mxfp4Data random_mxfp4(RandomInputs& rnd, std::size_t rows, std::size_t cols) {
  return {rnd.bytes(rows * ((cols + 1) / 2)), rnd.scales(rows * ((cols + 31) / 32))};
}

enum class Activations { finite, cancelling, with_nonfinite };

// Cancelling operands make the tests sensitive to the partition and the tree, not only to
// the final rounding: every pair (i, i+1) with i % 6 == 0 gets equal weights and opposite
// activations of size 2^30..2^44, so the pair's products cancel exactly in the total but sit
// in two different accumulators (i % 8 != (i+1) % 8) on the way. The moderate products added
// to those big accumulators lose low bits that depend on which accumulator took what and
// how the accumulators were combined, and the small result exposes them at fp32 precision.
bool cancel_pair_start(std::size_t i, std::size_t n) { return i % 6 == 0 && i + 1 < n; }

std::vector<float> cancelling_activations(RandomInputs& rnd, std::size_t batch, std::size_t cols) {
  std::vector<float> x = rnd.floats(batch * cols);
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t i = 0; i < cols; ++i) {
      if (!cancel_pair_start(i, cols)) continue;
      const float big = std::ldexp(1.0f + static_cast<float>(rnd.below(1024)) / 1024.0f, 30 + static_cast<int>(rnd.below(15)));
      x[b * cols + i] = rnd.below(2) != 0 ? big : -big;
      x[b * cols + i + 1] = -x[b * cols + i];
    }
  }
  return x;
}

/// Makes the weights of every cancelling pair equal (each row of a [rows, cols] matrix).
template <class T>
void pair_weights(std::vector<T>& w, std::size_t rows, std::size_t cols) {
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t i = 0; i < cols; ++i)
      if (cancel_pair_start(i, cols)) w[r * cols + i + 1] = w[r * cols + i];
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

void run_bf16(const KernelSet& set, RandomInputs& weights, const Shape& s, const std::vector<float>& x,
              std::vector<float>& y, Activations kind) {
  auto w = weights.bf16(s.rows * s.cols);
  if (kind == Activations::cancelling) pair_weights(w, s.rows, s.cols);
  set.matmul_bf16(w.data(), s.rows, s.cols, s.range, x.data(), s.batch, y.data());
}

void run_f32(const KernelSet& set, RandomInputs& weights, const Shape& s, const std::vector<float>& x,
             std::vector<float>& y, Activations kind) {
  auto w = weights.floats(s.rows * s.cols);
  if (kind == Activations::cancelling) pair_weights(w, s.rows, s.cols);
  set.matmul_f32(w.data(), s.rows, s.cols, s.range, x.data(), s.batch, y.data());
}

void run_mxfp4(const KernelSet& set, RandomInputs& weights, const Shape& s, const std::vector<float>& x,
               std::vector<float>& y, Activations kind) {
  Mxfp4Data m = random_mxfp4(weights, s.rows, s.cols);
  if (kind == Activations::cancelling) {
    // A pair (i, i+1) with i even is one byte: give both nibbles the low nibble's code.
    const std::size_t stride = (s.cols + 1) / 2;
    for (std::size_t r = 0; r < s.rows; ++r)
      for (std::size_t i = 0; i < s.cols; ++i)
        if (cancel_pair_start(i, s.cols)) {
          std::uint8_t& byte = m.packed[r * stride + i / 2];
          byte = static_cast<std::uint8_t>((byte & 0x0F) | (byte << 4));
        }
  }
  set.matmul_mxfp4(m.view(s.rows, s.cols), s.range, x.data(), s.batch, y.data());
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

TEST_CASE("inf and NaN activations give the scalar result (NaN where scalar gives NaN)",
          "[kernels_simd][nonfinite]") {
  // Includes MXFP4 groups with scale byte 255: their weights are ±0, and 0·inf is NaN in
  // the scalar set, so it must be NaN in every set.
  compare_all_shapes("matmul_bf16", Activations::with_nonfinite, run_bf16);
  compare_all_shapes("matmul_f32", Activations::with_nonfinite, run_f32);
  compare_all_shapes("matmul_mxfp4", Activations::with_nonfinite, run_mxfp4);
  compare_dots(nonfinite_activations, nonfinite_activations);
}
