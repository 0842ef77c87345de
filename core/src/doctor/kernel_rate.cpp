// measure_kernel_rates(): the shapes are the model's dense FFN (intermediate x hidden, BF16)
// and one routed expert's matrix (moe_intermediate x latent, MXFP4). A pool of 64 MiB of
// each is cycled so that, as in a run, the weights are not in the caches.
#include "doctor/kernel_rate.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

namespace k3::doctor {

namespace {

constexpr std::size_t kPoolBytes = 64u << 20;
constexpr std::size_t kMatrixCap = 32u << 20;  // one matrix at most: large models get fewer rows

using Clock = std::chrono::steady_clock;

/// Runs `product(begin, end)` over rows [0, rows) split in contiguous shares over `threads`.
template <class F>
void parallel_rows(std::size_t rows, int threads, F&& product) {
#pragma omp parallel num_threads(threads)
  {
    const auto n = static_cast<std::size_t>(omp_get_num_threads());
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
    const std::size_t b = rows * t / n, e = rows * (t + 1) / n;
    if (b < e) product(b, e);
  }
}

/// Repeats `one(i)` over the pool (i cycles) until `seconds` passed; bytes of weights per second.
template <class F>
double rate(std::size_t pool, std::size_t bytes_each, double seconds, F&& one) {
  std::size_t done = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  for (std::size_t i = 0;; i = (i + 1) % pool) {
    one(i);
    ++done;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (elapsed >= seconds && done >= pool) break;
  }
  return static_cast<double>(done * bytes_each) / elapsed;
}

}  // namespace

KernelRates measure_kernel_rates(const sdk::KernelSet& k, const ModelConfig& c, int threads, double seconds) {
  KernelRates out;
  std::mt19937 rng(0x6b33);
  threads = std::max(1, threads);

  // BF16: sign, exponent 120..130 (values near 1), random mantissa: normal and finite.
  const std::size_t cols = static_cast<std::size_t>(std::max<std::int64_t>(1, c.hidden_size));
  std::size_t rows = static_cast<std::size_t>(std::max<std::int64_t>(1, c.intermediate_size));
  rows = std::max<std::size_t>(1, std::min(rows, kMatrixCap / (cols * 2)));
  const std::size_t bf16_each = rows * cols * 2;
  const std::size_t bf16_pool = std::max<std::size_t>(1, kPoolBytes / bf16_each);
  std::vector<std::vector<std::uint16_t>> bf16(bf16_pool, std::vector<std::uint16_t>(rows * cols));
  for (auto& m : bf16)
    for (auto& v : m)
      v = static_cast<std::uint16_t>(((rng() & 1u) << 15) | ((120u + rng() % 11) << 7) | (rng() & 0x7fu));
  const std::size_t latent = static_cast<std::size_t>(std::max<std::int64_t>(1, c.routed_expert_hidden_size));
  std::vector<float> x(std::max(cols, latent));  // the input of either product
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (auto& v : x) v = uniform(rng);
  std::vector<float> y(std::max<std::size_t>(rows, static_cast<std::size_t>(std::max<std::int64_t>(1, c.moe_intermediate_size))));
  out.bf16_bytes_per_second = rate(bf16_pool, bf16_each, seconds / 2, [&](std::size_t i) {
    parallel_rows(rows, threads, [&](std::size_t b, std::size_t e) {
      k.matmul_bf16(bf16[i].data(), rows, cols, {b, e}, x.data(), 1, y.data());
    });
  });
  bf16.clear();

  // MXFP4: any nibble is a finite E2M1 code; scales 120..134.
  const std::size_t er = static_cast<std::size_t>(std::max<std::int64_t>(1, c.moe_intermediate_size));
  const std::size_t ec = latent;
  const std::size_t packed_each = er * ((ec + 1) / 2), scales_each = er * ((ec + 31) / 32);
  const std::size_t mx_each = packed_each + scales_each;
  const std::size_t mx_pool = std::max<std::size_t>(1, kPoolBytes / mx_each);
  std::vector<std::vector<std::uint8_t>> packed(mx_pool, std::vector<std::uint8_t>(packed_each));
  std::vector<std::vector<std::uint8_t>> scales(mx_pool, std::vector<std::uint8_t>(scales_each));
  for (auto& m : packed)
    for (auto& v : m) v = static_cast<std::uint8_t>(rng());
  for (auto& m : scales)
    for (auto& v : m) v = static_cast<std::uint8_t>(120 + rng() % 15);
  out.mxfp4_bytes_per_second = rate(mx_pool, mx_each, seconds / 2, [&](std::size_t i) {
    const sdk::Mxfp4Matrix m{packed[i].data(), scales[i].data(), er, ec};
    parallel_rows(er, threads, [&](std::size_t b, std::size_t e) { k.matmul_mxfp4(m, {b, e}, x.data(), 1, y.data()); });
  });
  return out;
}

}  // namespace k3::doctor
