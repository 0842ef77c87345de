// The accumulator partition and reduction tree themselves. Each hand case is built from
// powers of two so that a different partition, chain order or tree gives a different
// answer; the expected value is worked out by hand in the comment, then cross-checked
// against the independent contract implementation in reference.hpp. Finally random data
// with heavy cancellation is compared bit for bit with that implementation.
#include <catch2/catch.hpp>

#include <cmath>
#include <initializer_list>
#include <limits>
#include <utility>

#include "kernel_sets.hpp"
#include "matmul_cases.hpp"
#include "reference.hpp"

using k3test::bits_of;

namespace {

const double kBig = std::ldexp(1.0, 53);  // 2^53: adding 1 is a tie that rounds to even (back to 2^53)

struct HandCase {
  const char* why;
  std::vector<double> products;  // p_i = w_i · x_i, every p_i a power of two, ±0 or ±2^53
  double expected;               // by hand, under the contract
};

std::vector<double> with(std::size_t n, std::initializer_list<std::pair<std::size_t, double>> at) {
  std::vector<double> p(n, 0.0);
  for (const auto& [i, v] : at) p[i] = v;
  return p;
}

std::vector<HandCase> hand_cases() {
  return {
      {"A: (a0+a4) = 2^53+1 rounds to 2^53, (a2+a6) = -2^53+1 is exact: total 1 (left to right: 2)",
       with(8, {{0, kBig}, {4, 1}, {2, -kBig}, {6, 1}}), 1.0},
      {"B: lane 0 chains 1, 2^53, -2^53 in index order: 0; lane 1 holds 1: total 1 (left to right: 2)",
       with(17, {{0, 1}, {1, 1}, {8, kBig}, {16, -kBig}}), 1.0},
      {"C: a0 pairs with a4 (not a1): (2^53 - 2^53) + 1 = 1 (left to right: 0)",
       with(8, {{0, kBig}, {1, 1}, {4, -kBig}}), 1.0},
      {"D: even lanes sum before odd lanes: (2^53 + 1) - 2^53 = 0 (left to right: 1)",
       with(8, {{0, kBig}, {1, -kBig}, {2, 1}}), 0.0},
      {"E: element 8 joins lane 0, not lane 8 or lane 0 of 4: (2^53+1) - 2^53 = 0 (left to right: 1)",
       with(9, {{0, kBig}, {4, -kBig}, {8, 1}}), 0.0},
      {"F: lane 3 chains 1,1,1 then 2^53: 2^53+3 ties to 2^53+4, minus 2^53 = 4 (exact sum: 3)",
       with(40, {{3, 1}, {11, 1}, {19, 1}, {27, kBig}, {35, -kBig}}), 4.0},
      {"G: a single -0 product gives +0: the accumulators start at +0", with(1, {{0, -0.0}}), 0.0},
      {"H: only -0 products over several lanes still give +0", with(11, {{0, -0.0}, {3, -0.0}, {8, -0.0}, {10, -0.0}}),
       0.0},
  };
}

double left_to_right(const std::vector<double>& p) {
  double s = 0.0;
  for (double v : p) s += v;
  return s;
}

// Splits each product into an fp32 activation |p| (or 0) and a weight of ±1, the form
// every matmul format can express exactly.
struct SplitCase {
  std::vector<float> x;
  std::vector<float> sign;  // +1 or -1
};
SplitCase split(const std::vector<double>& p) {
  SplitCase s;
  for (double v : p) {
    s.x.push_back(static_cast<float>(std::fabs(v)));
    s.sign.push_back(std::signbit(v) ? -1.0f : 1.0f);
  }
  return s;
}

}  // namespace

TEST_CASE("hand cases: the independent reference agrees with the hand results", "[kernels][partition]") {
  for (const HandCase& c : hand_cases()) {
    INFO(c.why);
    CHECK(bits_of(k3test::contract_sum(c.products)) == bits_of(c.expected));
  }
  // The cases discriminate: left-to-right summation disagrees with at least A-E.
  int disagree = 0;
  for (const HandCase& c : hand_cases()) disagree += left_to_right(c.products) != c.expected ? 1 : 0;
  CHECK(disagree >= 5);
}

TEST_CASE("hand cases: dot_f32 follows the partition and tree", "[kernels][partition]") {
  for (const auto& [name, set] : k3test::runnable_kernel_sets()) {
    for (const HandCase& c : hand_cases()) {
      INFO("set " << name << ": " << c.why);
      const SplitCase s = split(c.products);
      CHECK(bits_of(set->dot_f32(s.sign.data(), s.x.data(), s.x.size())) == bits_of(c.expected));
      CHECK(bits_of(set->dot_f32(s.x.data(), s.sign.data(), s.x.size())) == bits_of(c.expected));
    }
  }
}

TEST_CASE("hand cases: every matmul format follows the partition and tree", "[kernels][partition]") {
  for (const auto& [name, set] : k3test::runnable_kernel_sets()) {
    for (const HandCase& c : hand_cases()) {
      const SplitCase s = split(c.products);
      const std::size_t n = s.x.size();
      const float expected = static_cast<float>(c.expected);

      std::vector<std::uint16_t> w_bf16(n);
      k3test::Mxfp4Owned w_mx(1, n);  // scale 127: codes 2 (+1) and 10 (-1)
      for (std::size_t i = 0; i < n; ++i) {
        w_bf16[i] = k3test::bf16_bits(s.sign[i]);
        w_mx.set_code(0, i, s.sign[i] < 0 ? 10u : 2u);
      }
      float y = std::numeric_limits<float>::quiet_NaN();
      INFO("set " << name << ": " << c.why);
      set->matmul_f32(s.sign.data(), 1, n, {0, 1}, s.x.data(), 1, &y);
      CHECK(bits_of(y) == bits_of(expected));
      set->matmul_bf16(w_bf16.data(), 1, n, {0, 1}, s.x.data(), 1, &y);
      CHECK(bits_of(y) == bits_of(expected));
      set->matmul_mxfp4(w_mx.view(), {0, 1}, s.x.data(), 1, &y);
      CHECK(bits_of(y) == bits_of(expected));
    }
  }
}

TEST_CASE("dot_f32 of zero elements is +0", "[kernels][partition]") {
  for (const auto& [name, set] : k3test::runnable_kernel_sets()) {
    INFO("set " << name);
    const float one = 1.0f;
    CHECK(bits_of(set->dot_f32(&one, &one, 0)) == 0u);
  }
}

TEST_CASE("random heavy cancellation: bit-identical to the independent contract implementation",
          "[kernels][partition]") {
  // Wide exponent ranges make almost every addition round, so any deviation from the
  // documented partition or tree shows up in the bits.
  k3test::Ranges wide;
  wide.x_lo = -30;
  wide.x_hi = 30;
  wide.w_lo = -20;
  wide.w_hi = 20;
  wide.scale_lo = 60;  // 2^-67 .. 2^67 with |x| < 2^30: outputs stay finite
  wide.scale_hi = 194;
  for (const auto& [name, set] : k3test::runnable_kernel_sets()) {
    std::uint64_t seed = 100;
    for (k3test::Format f : k3test::kFormats) {
      for (std::size_t cols : {1, 5, 8, 13, 31, 32, 33, 64, 65, 97, 200, 1027}) {
        const k3test::MatmulCase mc(f, 9, cols, 2, ++seed, wide);
        INFO("set " << name << ", " << to_string(f) << ", cols " << cols);
        CHECK(k3test::same_bits(mc.run_all(*set), mc.expected()));
      }
    }
    for (std::size_t n : {1, 7, 8, 9, 63, 64, 65, 1000, 4097}) {
      std::mt19937_64 rng(++seed);
      const auto a = k3test::random_floats(rng, n, -30, 30);
      const auto b = k3test::random_floats(rng, n, -30, 30);
      const auto p = k3test::row_products([&](std::size_t i) { return double(a[i]); }, b.data(), n);
      INFO("set " << name << ", dot_f32 n " << n);
      CHECK(bits_of(set->dot_f32(a.data(), b.data(), n)) == bits_of(k3test::contract_sum(p)));
    }
  }
}
