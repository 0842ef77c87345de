// One random matmul problem per weight format, so every test can run all three formats
// through the same code: call a kernel set on it, or compute the contract's expected
// output independently (reference.hpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <k3/kernels.hpp>

#include "reference.hpp"

namespace k3test {

enum class Format { bf16, f32, mxfp4 };
inline const char* to_string(Format f) {
  switch (f) {
    case Format::bf16: return "bf16";
    case Format::f32: return "f32";
    case Format::mxfp4: return "mxfp4";
  }
  return "?";
}
inline constexpr Format kFormats[] = {Format::bf16, Format::f32, Format::mxfp4};

/// Value ranges of a random problem (as powers of two).
struct Ranges {
  int x_lo = -4, x_hi = 4;             // activations
  int w_lo = -4, w_hi = 4;             // bf16 / f32 weights
  int scale_lo = 117, scale_hi = 137;  // mxfp4 scale bytes (255 groups are added on top)
};

struct MatmulCase {
  Format format;
  std::size_t rows, cols, batch;
  std::vector<float> x;               // [batch, cols]
  std::vector<std::uint16_t> w_bf16;  // [rows, cols]
  std::vector<float> w_f32;           // [rows, cols]
  Mxfp4Owned w_mxfp4;                 // [rows, cols] packed

  MatmulCase(Format f, std::size_t r, std::size_t c, std::size_t b, std::uint64_t seed, Ranges ranges = {})
      : format(f), rows(r), cols(c), batch(b), w_mxfp4(f == Format::mxfp4 ? r : 0, f == Format::mxfp4 ? c : 0) {
    std::mt19937_64 rng(seed);
    x = random_floats(rng, batch * cols, ranges.x_lo, ranges.x_hi);
    switch (f) {
      case Format::bf16: w_bf16 = random_bf16(rng, rows * cols, ranges.w_lo, ranges.w_hi); break;
      case Format::f32: w_f32 = random_floats(rng, rows * cols, ranges.w_lo, ranges.w_hi); break;
      case Format::mxfp4: w_mxfp4 = random_mxfp4(rng, rows, cols, ranges.scale_lo, ranges.scale_hi); break;
    }
  }

  /// Runs `set` on rows [begin, end) into y ([batch, rows]), with `batch_rows` batch rows
  /// starting at batch row `first`.
  void run(const k3::sdk::KernelSet& set, k3::sdk::RowRange range, float* y, std::size_t first = 0,
           std::size_t batch_rows = std::numeric_limits<std::size_t>::max()) const {
    const std::size_t nb = batch_rows == std::numeric_limits<std::size_t>::max() ? batch : batch_rows;
    const float* xb = x.data() + first * cols;
    switch (format) {
      case Format::bf16: set.matmul_bf16(w_bf16.data(), rows, cols, range, xb, nb, y); break;
      case Format::f32: set.matmul_f32(w_f32.data(), rows, cols, range, xb, nb, y); break;
      case Format::mxfp4: set.matmul_mxfp4(w_mxfp4.view(), range, xb, nb, y); break;
    }
  }

  /// The full output [batch, rows] from one call.
  [[nodiscard]] std::vector<float> run_all(const k3::sdk::KernelSet& set) const {
    std::vector<float> y(batch * rows, std::numeric_limits<float>::quiet_NaN());
    run(set, {0, rows}, y.data());
    return y;
  }

  [[nodiscard]] double weight(std::size_t r, std::size_t c) const {
    switch (format) {
      case Format::bf16: return double(bf16_value(w_bf16[r * cols + c]));
      case Format::f32: return double(w_f32[r * cols + c]);
      case Format::mxfp4: return w_mxfp4.weight(r, c);
    }
    return 0;
  }

  /// The exact products of output (b, r).
  [[nodiscard]] std::vector<double> products(std::size_t b, std::size_t r) const {
    return row_products([&](std::size_t c) { return weight(r, c); }, x.data() + b * cols, cols);
  }

  /// The contract's output, computed by the independent reference.
  [[nodiscard]] std::vector<float> expected() const {
    std::vector<float> y(batch * rows);
    for (std::size_t b = 0; b < batch; ++b)
      for (std::size_t r = 0; r < rows; ++r) y[b * rows + r] = static_cast<float>(contract_sum(products(b, r)));
    return y;
  }
};

}  // namespace k3test
