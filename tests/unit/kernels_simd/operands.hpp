// Operands and comparisons shared by the bit-identity tests: poisoned output buffers, bit
// comparison (NaN-tolerant where inputs are not finite), non-finite and cancelling
// activations, random MXFP4 matrices, and one call of each matmul on them.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <k3/kernels.hpp>

#include "random_inputs.hpp"

namespace k3simd {

struct Shape {
  std::size_t rows;
  std::size_t cols;
  std::size_t batch;
  k3::sdk::RowRange range;
};

inline std::string describe(const std::string& set, const char* kernel, const Shape& s) {
  std::ostringstream os;
  os << set << "." << kernel << " rows " << s.rows << " cols " << s.cols << " batch " << s.batch << " range ["
     << s.range.begin << ", " << s.range.end << ")";
  return os.str();
}

/// Output buffers start as a NaN pattern neither set would compute, so a write outside
/// the range, or a missing write inside it, shows up in the comparison.
inline std::vector<float> poisoned(std::size_t n) {
  return std::vector<float>(n, RandomInputs::from_bits(0x7FC0DEADu));
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// Bit identity, except that two NaNs count as equal: IEEE 754 leaves the payload and sign
/// of a NaN result unspecified and compilers commute additions freely, so the contract
/// (sdk/k3/kernels.hpp) promises bit identity for finite inputs and NaN-ness otherwise.
inline bool same_bits_or_both_nan(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (RandomInputs::to_bits(a[i]) != RandomInputs::to_bits(b[i])) return false;
  }
  return true;
}

/// Activations with inf, -inf and NaN sprinkled in (about 1 in 12).
inline std::vector<float> nonfinite_activations(RandomInputs& rnd, std::size_t n) {
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
  k3::sdk::Mxfp4Matrix view(std::size_t rows, std::size_t cols) const {
    return {packed.data(), scales.data(), rows, cols};
  }
};

inline Mxfp4Data random_mxfp4(RandomInputs& rnd, std::size_t rows, std::size_t cols) {
  return {rnd.bytes(rows * ((cols + 1) / 2)), rnd.scales(rows * ((cols + 31) / 32))};
}

enum class Activations { finite, cancelling, with_nonfinite };

// Cancelling operands make the tests sensitive to the partition and the tree, not only to
// the final rounding: every pair (i, i+1) with i % 6 == 0 gets equal weights and opposite
// activations of size 2^30..2^44, so the pair's products cancel exactly in the total but sit
// in two different accumulators (i % 8 != (i+1) % 8) on the way. The moderate products added
// to those big accumulators lose low bits that depend on which accumulator took what and
// how the accumulators were combined, and the small result exposes them at fp32 precision.
inline bool cancel_pair_start(std::size_t i, std::size_t n) { return i % 6 == 0 && i + 1 < n; }

inline std::vector<float> cancelling_activations(RandomInputs& rnd, std::size_t batch, std::size_t cols) {
  std::vector<float> x = rnd.floats(batch * cols);
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t i = 0; i < cols; ++i) {
      if (!cancel_pair_start(i, cols)) continue;
      const float big =
          std::ldexp(1.0f + static_cast<float>(rnd.below(1024)) / 1024.0f, 30 + static_cast<int>(rnd.below(15)));
      x[b * cols + i] = rnd.below(2) != 0 ? big : -big;
      x[b * cols + i + 1] = -x[b * cols + i];
    }
  }
  return x;
}

/// Makes the weights of every cancelling pair equal (each row of a [rows, cols] matrix).
template <class T>
inline void pair_weights(std::vector<T>& w, std::size_t rows, std::size_t cols) {
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t i = 0; i < cols; ++i)
      if (cancel_pair_start(i, cols)) w[r * cols + i + 1] = w[r * cols + i];
}

// One call of each matmul on shape s: weights drawn from `weights` (paired for cancelling
// activations), x [s.batch, s.cols], y [s.batch, s.rows].
inline void run_bf16(const k3::sdk::KernelSet& set, RandomInputs& weights, const Shape& s, const std::vector<float>& x,
                     std::vector<float>& y, Activations kind) {
  auto w = weights.bf16(s.rows * s.cols);
  if (kind == Activations::cancelling) pair_weights(w, s.rows, s.cols);
  set.matmul_bf16(w.data(), s.rows, s.cols, s.range, x.data(), s.batch, y.data());
}

inline void run_f32(const k3::sdk::KernelSet& set, RandomInputs& weights, const Shape& s, const std::vector<float>& x,
                    std::vector<float>& y, Activations kind) {
  auto w = weights.floats(s.rows * s.cols);
  if (kind == Activations::cancelling) pair_weights(w, s.rows, s.cols);
  set.matmul_f32(w.data(), s.rows, s.cols, s.range, x.data(), s.batch, y.data());
}

inline void run_mxfp4(const k3::sdk::KernelSet& set, RandomInputs& weights, const Shape& s, const std::vector<float>& x,
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

}  // namespace k3simd
