// Agreement with a naive long-double sum within the bound derived in reference.hpp:
//   |y − naive| ≤ 2^-24·(|naive| + e) + 2^-150 + e,  e = (n−1)·(DBL_EPSILON + LDBL_EPSILON)·Σ|p|
// (matmul outputs), and |dot − naive| ≤ e for dot_f32, which is returned unrounded.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernel_sets.hpp"
#include "matmul_cases.hpp"
#include "reference.hpp"

namespace {
constexpr std::size_t kSizes[] = {1, 2, 7, 8, 9, 31, 32, 33, 64, 65, 100, 257, 1000, 4099};
}

TEST_CASE("matmuls agree with a naive long-double reference within the derived bound", "[kernels][reference]") {
  for (const auto& [name, set] : k3test::runnable_kernel_sets()) {
    std::uint64_t seed = 7000;
    for (k3test::Format f : k3test::kFormats) {
      for (std::size_t cols : kSizes) {
        const k3test::MatmulCase mc(f, 5, cols, 2, ++seed);
        const std::vector<float> y = mc.run_all(*set);
        for (std::size_t b = 0; b < mc.batch; ++b) {
          for (std::size_t r = 0; r < mc.rows; ++r) {
            const k3test::NaiveSum naive = k3test::naive_sum(mc.products(b, r));
            const long double err = std::fabs(static_cast<long double>(y[b * mc.rows + r]) - naive.sum);
            const long double bound = k3test::matvec_bound(naive);
            INFO("set " << name << ", " << to_string(f) << ", cols " << cols << ", b " << b << ", r " << r << ": |err| "
                        << static_cast<double>(err) << " > bound " << static_cast<double>(bound));
            CHECK(err <= bound);
            // The bound is no blank cheque: at most a few fp32 ulps of the scale of the terms.
            CHECK(bound <= std::ldexp(1.0L, -20) * (naive.sum_abs + 1e-30L));
          }
        }
      }
    }
  }
}

TEST_CASE("dot_f32 agrees with a naive long-double reference within the fp64 bound", "[kernels][reference]") {
  for (const auto& [name, set] : k3test::runnable_kernel_sets()) {
    std::uint64_t seed = 9000;
    for (std::size_t n : kSizes) {
      std::mt19937_64 rng(++seed);
      const auto a = k3test::random_floats(rng, n);
      const auto b = k3test::random_floats(rng, n);
      const auto p = k3test::row_products([&](std::size_t i) { return double(a[i]); }, b.data(), n);
      const k3test::NaiveSum naive = k3test::naive_sum(p);
      const double dot = set->dot_f32(a.data(), b.data(), n);
      INFO("set " << name << ", n " << n);
      CHECK(std::fabs(static_cast<long double>(dot) - naive.sum) <= k3test::dot_bound(naive));
      // Sum of squares (the norm use): every term positive, so the relative bound is tight.
      const auto sq = k3test::row_products([&](std::size_t i) { return double(a[i]); }, a.data(), n);
      const k3test::NaiveSum naive_sq = k3test::naive_sum(sq);
      CHECK(std::fabs(static_cast<long double>(set->dot_f32(a.data(), a.data(), n)) - naive_sq.sum) <=
            k3test::dot_bound(naive_sq));
    }
  }
}
