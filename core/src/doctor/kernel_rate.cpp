// measure_kernel_rates(): the shapes are one model's dense FFN (intermediate x hidden, BF16)
// and one routed expert's three matrices (gate and up [I, L], down [L, I], MXFP4). A pool of
// 64 MiB of each is cycled so that, as in a run, the weights are not in the caches. The pool
// is filled by splitmix64 (std::mt19937 took most of the doctor's time on 128 MiB) and is
// one allocation, so a model with tiny experts does not pay for ten thousand vectors.
#include "doctor/kernel_rate.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

namespace k3::doctor {

namespace {

constexpr std::size_t kPoolBytes = 64u << 20;
constexpr std::size_t kMatrixCap = 32u << 20;  // one BF16 matrix at most: large models get fewer rows

using Clock = std::chrono::steady_clock;

/// splitmix64: fast, and good enough for weights that only have to be finite and varied.
struct SplitMix {
  std::uint64_t state;
  std::uint64_t operator()() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

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

/// Repeats `one(i)` over the pool (i cycles) until `seconds` passed, at least once; bytes of
/// weights per second.
template <class F>
double rate(std::size_t pool, std::size_t bytes_each, double seconds, F&& one) {
  std::size_t done = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  for (std::size_t i = 0; done == 0 || elapsed < seconds; i = (i + 1) % pool) {
    one(i);
    ++done;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return static_cast<double>(done * bytes_each) / elapsed;
}

std::size_t positive(std::int64_t v) { return static_cast<std::size_t>(std::max<std::int64_t>(1, v)); }

}  // namespace

/// An MXFP4 matrix's packed nibbles and its scales (one per 32 columns).
std::size_t packed_bytes(const DoctorShape& s) { return s.rows * ((s.cols + 1) / 2); }
std::size_t scale_bytes(const DoctorShape& s) { return s.rows * ((s.cols + 31) / 32); }

DoctorKernelShapes kernel_shapes(const ModelConfig& c) {
  DoctorKernelShapes s;
  s.bf16.cols = positive(c.hidden_size);
  s.bf16_rows_of_model = positive(c.intermediate_size);
  s.bf16.rows = std::max<std::size_t>(1, std::min(s.bf16_rows_of_model, kMatrixCap / (s.bf16.cols * 2)));
  const std::size_t I = positive(c.moe_intermediate_size), L = positive(c.routed_expert_hidden_size);
  s.expert = {{I, L}, {I, L}, {L, I}};  // gate (w1), up (w3), down (w2): docs/model-spec.md §2
  return s;
}

KernelRates measure_kernel_rates(const sdk::KernelSet& k, const DoctorKernelShapes& s, int threads, double seconds) {
  KernelRates out;
  SplitMix rng{0x6b33};
  threads = std::max(1, threads);
  std::size_t widest = s.bf16.cols, tallest = s.bf16.rows;
  for (const auto& m : s.expert) {
    widest = std::max(widest, m.cols);
    tallest = std::max(tallest, m.rows);
  }
  std::vector<float> x(widest), y(tallest);  // the input and output of any product
  for (auto& v : x) v = static_cast<float>(static_cast<double>(rng() >> 11) * 0x1p-52 - 1.0);  // [-1, 1)

  // BF16: sign, exponent 120..130 (values near 1), random mantissa: normal and finite.
  const std::size_t rows = s.bf16.rows, cols = s.bf16.cols, bf16_each = rows * cols;
  const std::size_t bf16_pool = std::max<std::size_t>(1, kPoolBytes / (bf16_each * 2));
  {
    std::vector<std::uint16_t> bf16(bf16_pool * bf16_each);
    for (std::size_t i = 0; i < bf16.size(); i += 4) {
      const std::uint64_t r = rng();
      for (std::size_t j = 0; j < 4 && i + j < bf16.size(); ++j) {
        const auto b = static_cast<std::uint32_t>(r >> (16 * j)) & 0xffffu;
        bf16[i + j] = static_cast<std::uint16_t>((b & 0x807fu) | ((120u + (b >> 7) % 11) << 7));
      }
    }
    out.bf16_bytes_per_second = rate(bf16_pool, bf16_each * 2, seconds / 2, [&](std::size_t i) {
      const std::uint16_t* w = bf16.data() + i * bf16_each;
      parallel_rows(rows, threads, [&](std::size_t b, std::size_t e) {
        k.matmul_bf16(w, rows, cols, {b, e}, x.data(), 1, y.data());
      });
    });
  }

  // MXFP4 experts, each its three matrices one after another (packed, then scales): any
  // nibble is a finite E2M1 code; scales 120..134.
  const std::size_t expert_each = s.expert_bytes();
  const std::size_t mx_pool = std::max<std::size_t>(1, kPoolBytes / expert_each);
  std::vector<std::uint8_t> mx(mx_pool * expert_each);
  for (std::size_t e = 0; e < mx_pool; ++e) {
    std::uint8_t* p = mx.data() + e * expert_each;
    for (const auto& m : s.expert) {
      for (std::size_t i = 0; i < packed_bytes(m); i += 8) {
        const std::uint64_t r = rng();
        std::memcpy(p + i, &r, std::min<std::size_t>(8, packed_bytes(m) - i));
      }
      p += packed_bytes(m);
      for (std::size_t i = 0; i < scale_bytes(m); ++i) p[i] = static_cast<std::uint8_t>(120 + rng() % 15);
      p += scale_bytes(m);
    }
  }
  out.mxfp4_bytes_per_second = rate(mx_pool, expert_each, seconds / 2, [&](std::size_t e) {
    const std::uint8_t* p = mx.data() + e * expert_each;
    for (const auto& m : s.expert) {
      const sdk::Mxfp4Matrix w{p, p + packed_bytes(m), m.rows, m.cols};
      parallel_rows(m.rows, threads, [&](std::size_t b, std::size_t end) {
        k.matmul_mxfp4(w, {b, end}, x.data(), 1, y.data());
      });
      p += packed_bytes(m) + scale_bytes(m);
    }
  });
  return out;
}

}  // namespace k3::doctor

namespace k3 {

std::size_t DoctorKernelShapes::bf16_bytes() const { return bf16.rows * bf16.cols * 2; }

std::size_t DoctorKernelShapes::expert_bytes() const {
  std::size_t n = 0;
  for (const auto& m : expert) n += doctor::packed_bytes(m) + doctor::scale_bytes(m);
  return n;
}

}  // namespace k3
