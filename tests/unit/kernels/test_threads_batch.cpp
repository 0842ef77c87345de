// Properties the host relies on when it splits work: rows split over any number of
// threads, batch rows, and row ranges give exactly the bits of one whole call; and every
// SIMD set gives exactly the scalar set's bits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <thread>

#include "kernel_sets.hpp"
#include "matmul_cases.hpp"
#include "reference.hpp"

namespace {

/// Runs `mc` with its rows split into `threads` contiguous, uneven ranges, one std::thread
/// each, all writing into one output.
std::vector<float> run_split(const k3::sdk::KernelSet& set, const k3test::MatmulCase& mc, std::size_t threads) {
  std::vector<float> y(mc.batch * mc.rows, std::numeric_limits<float>::quiet_NaN());
  std::vector<std::thread> pool;
  std::size_t begin = 0;
  for (std::size_t t = 0; t < threads; ++t) {
    // Thread t takes a share proportional to t+1, so ranges differ in size and alignment.
    const std::size_t weight_before = t * (t + 1) / 2, weight_total = threads * (threads + 1) / 2;
    const std::size_t end = t + 1 == threads ? mc.rows : mc.rows * (weight_before + t + 1) / weight_total;
    pool.emplace_back([&set, &mc, &y, begin, end] { mc.run(set, {begin, end}, y.data()); });
    begin = end;
  }
  for (auto& th : pool) th.join();
  return y;
}

}  // namespace

TEST_CASE("row splits over 1, 2, 3 and 7 threads are bit-identical to one call", "[kernels][threads]") {
  for (const auto& [name, set] : k3test::runnable_kernel_sets()) {
    std::uint64_t seed = 300;
    for (k3test::Format f : k3test::kFormats) {
      const k3test::MatmulCase mc(f, 203, 259, 3, ++seed);
      const std::vector<float> whole = mc.run_all(*set);
      for (std::size_t threads : {1, 2, 3, 7}) {
        INFO("set " << name << ", " << to_string(f) << ", threads " << threads);
        CHECK(k3test::same_bits(run_split(*set, mc, threads), whole));
      }
    }
  }
}

TEST_CASE("each batch row equals the batch-1 result bit for bit", "[kernels][batch]") {
  // Batch sizes around the sets' position tiles (4 and 8 positions at a time) and shapes
  // whose rows and columns are not multiples of the row tiles, 8 or 32; each batch row is
  // compared with the same set's batch-1 call and with the scalar set's.
  const auto scalar = k3test::scalar_kernels();
  for (const auto& [name, set] : k3test::runnable_kernel_sets()) {
    std::uint64_t seed = 400;
    for (std::size_t batch : {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 64}) {
      for (k3test::Format f : k3test::kFormats) {
        const k3test::MatmulCase mc(f, batch % 2 == 0 ? 17 : 11, batch % 3 == 0 ? 77 : 1031, batch, ++seed);
        const std::vector<float> batched = mc.run_all(*set);
        for (std::size_t b = 0; b < mc.batch; ++b) {
          std::vector<float> single(mc.rows, std::numeric_limits<float>::quiet_NaN());
          mc.run(*set, {0, mc.rows}, single.data(), b, 1);
          std::vector<float> reference(mc.rows, std::numeric_limits<float>::quiet_NaN());
          mc.run(*scalar, {0, mc.rows}, reference.data(), b, 1);
          INFO("set " << name << ", " << to_string(f) << ", batch " << batch << ", batch row " << b);
          CHECK(std::memcmp(single.data(), batched.data() + b * mc.rows, mc.rows * sizeof(float)) == 0);
          CHECK(std::memcmp(reference.data(), batched.data() + b * mc.rows, mc.rows * sizeof(float)) == 0);
        }
      }
    }
  }
}

TEST_CASE("only the rows of the range are written, in every batch row", "[kernels][batch]") {
  for (const auto& [name, set] : k3test::runnable_kernel_sets()) {
    for (k3test::Format f : k3test::kFormats) {
      const k3test::MatmulCase mc(f, 11, 40, 3, 500);
      const std::vector<float> whole = mc.run_all(*set);
      const float sentinel = -12345.0f;
      std::vector<float> y(mc.batch * mc.rows, sentinel);
      mc.run(*set, {3, 8}, y.data());
      INFO("set " << name << ", " << to_string(f));
      for (std::size_t b = 0; b < mc.batch; ++b)
        for (std::size_t r = 0; r < mc.rows; ++r) {
          const std::size_t i = b * mc.rows + r;
          if (r >= 3 && r < 8)
            CHECK(k3test::bits_of(y[i]) == k3test::bits_of(whole[i]));
          else
            CHECK(y[i] == sentinel);
        }
      std::vector<float> untouched(mc.batch * mc.rows, sentinel);
      mc.run(*set, {4, 4}, untouched.data());  // an empty range writes nothing
      CHECK(std::all_of(untouched.begin(), untouched.end(), [&](float v) { return v == sentinel; }));
    }
  }
}

TEST_CASE("odd sizes are bit-identical to the independent contract implementation", "[kernels][sizes]") {
  for (const auto& [name, set] : k3test::runnable_kernel_sets()) {
    std::uint64_t seed = 600;
    for (k3test::Format f : k3test::kFormats)
      for (std::size_t rows : {1, 3, 17})
        for (std::size_t cols : {1, 2, 3, 7, 15, 16, 17, 31, 33, 63, 65, 95, 127, 129, 255, 257}) {
          const k3test::MatmulCase mc(f, rows, cols, 2, ++seed);
          INFO("set " << name << ", " << to_string(f) << ", rows " << rows << ", cols " << cols);
          CHECK(k3test::same_bits(mc.run_all(*set), mc.expected()));
        }
  }
}

TEST_CASE("every runnable kernel set matches the scalar set bit for bit", "[kernels][cross-set]") {
  const auto sets = k3test::runnable_kernel_sets();
  if (sets.size() < 2) {
    WARN("SKIP cross-set comparison: only the scalar kernel set is on the plugin search path");
    return;
  }
  const auto& scalar = *sets.front().set;
  std::uint64_t seed = 800;
  for (std::size_t i = 1; i < sets.size(); ++i) {
    for (k3test::Format f : k3test::kFormats)
      for (std::size_t cols : {1, 7, 8, 9, 31, 32, 33, 64, 65, 100, 511, 2048, 7168}) {
        const k3test::MatmulCase mc(f, 13, cols, 3, ++seed);
        INFO("set " << sets[i].name << ", " << to_string(f) << ", cols " << cols);
        CHECK(k3test::same_bits(mc.run_all(*sets[i].set), mc.run_all(scalar)));
      }
    for (std::size_t n : {0, 1, 7, 8, 9, 33, 1000, 7168}) {
      std::mt19937_64 rng(++seed);
      const auto a = k3test::random_floats(rng, n, -20, 20);
      const auto b = k3test::random_floats(rng, n, -20, 20);
      INFO("set " << sets[i].name << ", dot_f32 n " << n);
      CHECK(k3test::bits_of(sets[i].set->dot_f32(a.data(), b.data(), n)) ==
            k3test::bits_of(scalar.dot_f32(a.data(), b.data(), n)));
    }
  }
}
