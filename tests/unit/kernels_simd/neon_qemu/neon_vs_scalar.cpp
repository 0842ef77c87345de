// The neon set's kernels against the scalar reference, bit for bit, built with Debian's
// aarch64 cross compiler and run under qemu-aarch64 (run_neon_qemu.cmake). It links
// neon_kernels.cpp and cpu_support.cpp directly (the plugin host and its libraries are not
// cross-built here) and the header-only scalar reference, and checks the same cases as
// test_bit_identity.cpp: every column count 1..70 and odd larger ones, 1..9 rows, batch
// 1..5, partial row ranges, MXFP4 edge scales and padding nibbles, cancelling operands,
// inf/NaN activations (NaN-ness only), and dot_f32; and, as test_batch_positions.cpp, batches
// of n in {1..9, 15, 16, 17, 31, 64} positions (every remainder of the neon set's position
// tile). The expected output is always the scalar set's batch-1 call, one position at a
// time. Prints each mismatch; exit 1 if any.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "random_inputs.hpp"
#include "scalar_ops.hpp"
#include "simd_sets.hpp"

namespace {

using k3::sdk::Mxfp4Matrix;
using k3::sdk::RowRange;
using k3simd::RandomInputs;
namespace neon = k3::kernels::neon;
namespace scalar = k3::kernels::scalar;

int g_failures = 0;
int g_checks = 0;

enum class Kind { finite, cancelling, nonfinite };

bool same(float a, float b, Kind kind) {
  if (kind == Kind::nonfinite && std::isnan(a) && std::isnan(b)) return true;
  return RandomInputs::to_bits(a) == RandomInputs::to_bits(b);
}

bool cancel_pair_start(std::size_t i, std::size_t n) { return i % 6 == 0 && i + 1 < n; }

std::vector<float> activations(RandomInputs& rnd, std::size_t batch, std::size_t cols, Kind kind) {
  std::vector<float> x = rnd.floats(batch * cols);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t i = 0; i < cols; ++i) {
      float& v = x[b * cols + i];
      if (kind == Kind::nonfinite) {
        const unsigned k = rnd.below(36);
        if (k == 0) v = INFINITY;
        if (k == 1) v = -INFINITY;
        if (k == 2) v = NAN;
      } else if (kind == Kind::cancelling && cancel_pair_start(i, cols)) {
        const float big =
            std::ldexp(1.0f + static_cast<float>(rnd.below(1024)) / 1024.0f, 30 + static_cast<int>(rnd.below(15)));
        v = rnd.below(2) != 0 ? big : -big;
        x[b * cols + i + 1] = -v;
      }
    }
  return x;
}

template <class T>
void pair_up(std::vector<T>& w, std::size_t rows, std::size_t cols) {
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t i = 0; i < cols; ++i)
      if (cancel_pair_start(i, cols)) w[r * cols + i + 1] = w[r * cols + i];
}

void compare(const char* what, std::size_t rows, std::size_t cols, std::size_t batch, RowRange range,
             const std::vector<float>& want, const std::vector<float>& got, Kind kind) {
  ++g_checks;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!same(want[i], got[i], kind)) {
      ++g_failures;
      std::printf("MISMATCH %s rows %zu cols %zu batch %zu range [%zu, %zu) kind %d: output %zu want %a got %a\n", what,
                  rows, cols, batch, range.begin, range.end, static_cast<int>(kind), i, static_cast<double>(want[i]),
                  static_cast<double>(got[i]));
      return;
    }
  }
}

void run_shape(RandomInputs& rnd, std::size_t rows, std::size_t cols, std::size_t batch, RowRange range, Kind kind) {
  const std::vector<float> x = activations(rnd, batch, cols, kind);
  const float poison = RandomInputs::from_bits(0x7FC0DEADu);
  {
    auto w = rnd.bf16(rows * cols);
    if (kind == Kind::cancelling) pair_up(w, rows, cols);
    std::vector<float> want(batch * rows, poison), got(batch * rows, poison);
    for (std::size_t b = 0; b < batch; ++b)
      scalar::matmul_bf16(w.data(), rows, cols, range, x.data() + b * cols, 1, want.data() + b * rows);
    neon::ops.matmul_bf16(w.data(), rows, cols, range, x.data(), batch, got.data());
    compare("matmul_bf16", rows, cols, batch, range, want, got, kind);
  }
  {
    auto w = rnd.floats(rows * cols);
    if (kind == Kind::cancelling) pair_up(w, rows, cols);
    std::vector<float> want(batch * rows, poison), got(batch * rows, poison);
    for (std::size_t b = 0; b < batch; ++b)
      scalar::matmul_f32(w.data(), rows, cols, range, x.data() + b * cols, 1, want.data() + b * rows);
    neon::ops.matmul_f32(w.data(), rows, cols, range, x.data(), batch, got.data());
    compare("matmul_f32", rows, cols, batch, range, want, got, kind);
  }
  {
    const std::size_t stride = (cols + 1) / 2;
    auto packed = rnd.bytes(rows * stride);
    const auto scales = rnd.scales(rows * ((cols + 31) / 32));
    if (kind == Kind::cancelling)
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t i = 0; i < cols; ++i)
          if (cancel_pair_start(i, cols)) {
            std::uint8_t& byte = packed[r * stride + i / 2];
            byte = static_cast<std::uint8_t>((byte & 0x0F) | (byte << 4));
          }
    const Mxfp4Matrix m{packed.data(), scales.data(), rows, cols};
    std::vector<float> want(batch * rows, poison), got(batch * rows, poison);
    for (std::size_t b = 0; b < batch; ++b)
      scalar::matmul_mxfp4(m, range, x.data() + b * cols, 1, want.data() + b * rows);
    neon::ops.matmul_mxfp4(m, range, x.data(), batch, got.data());
    compare("matmul_mxfp4", rows, cols, batch, range, want, got, kind);
  }
}

void run_dots(RandomInputs& rnd, Kind kind) {
  for (std::size_t n = 0; n <= 300; ++n) {
    std::vector<float> a = activations(rnd, 1, n, kind == Kind::cancelling ? Kind::finite : kind);
    if (kind == Kind::cancelling) pair_up(a, 1, n);
    const std::vector<float> b = activations(rnd, 1, n, kind);
    const double want = scalar::dot_f32(a.data(), b.data(), n);
    const double got = neon::ops.dot_f32(a.data(), b.data(), n);
    ++g_checks;
    std::uint64_t wb, gb;
    std::memcpy(&wb, &want, 8);
    std::memcpy(&gb, &got, 8);
    const bool ok = (kind == Kind::nonfinite && std::isnan(want) && std::isnan(got)) || wb == gb;
    if (!ok) {
      ++g_failures;
      std::printf("MISMATCH dot_f32 n %zu kind %d: want %a got %a\n", n, static_cast<int>(kind), want, got);
    }
  }
}

}  // namespace

int main() {
  if (!neon::cpu_supported()) {
    std::printf("FAIL: cpu_supported() is false on an aarch64 CPU with Advanced SIMD\n");
    return 1;
  }
  RandomInputs rnd(0x4e30u);
  std::vector<std::size_t> cols_list;
  for (std::size_t n = 1; n <= 70; ++n) cols_list.push_back(n);
  for (std::size_t n : {97, 127, 129, 255, 257, 1023, 1025, 3585}) cols_list.push_back(n);
  for (Kind kind : {Kind::finite, Kind::cancelling, Kind::nonfinite}) {
    for (std::size_t cols : cols_list)
      for (std::size_t rows : {1, 4, 6, 9}) {
        run_shape(rnd, rows, cols, 1 + (cols + rows) % 5, {0, rows}, kind);
        const std::size_t begin = rnd.below(static_cast<unsigned>(rows));
        const std::size_t end = begin + 1 + rnd.below(static_cast<unsigned>(rows - begin));
        run_shape(rnd, rows, cols, 1 + rnd.below(5), {begin, end}, kind);
      }
    run_dots(rnd, kind);
    std::size_t i = 0;
    for (std::size_t batch : {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 64})
      for (std::size_t cols : {1, 7, 9, 31, 33, 63, 70, 257, 1025}) {
        const std::size_t rows = std::size_t{1} + 4 * (i++ % 3);  // 1, 5, 9
        const std::size_t begin = i % 2 == 0 ? 0 : rnd.below(static_cast<unsigned>(rows));
        const std::size_t end = i % 2 == 0 ? rows : begin + 1 + rnd.below(static_cast<unsigned>(rows - begin));
        run_shape(rnd, rows, cols, batch, {begin, end}, kind);
      }
  }
  std::printf("neon vs scalar: %d comparisons, %d mismatches\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
