// maths/router_copy.hpp: quantising a router and its approximate logits.
#include "maths/router_copy.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace k3::maths {

namespace {

std::size_t row_bytes_of(std::size_t cols, int bits) { return bits == 8 ? cols : (cols + 1) / 2; }

}  // namespace

RouterCopy::RouterCopy(std::size_t experts, std::size_t cols, int bits)
    : rows_(experts), cols_(cols), bits_(bits), row_bytes_(row_bytes_of(cols, bits)) {
  if (bits != 8 && bits != 4) throw std::invalid_argument("a router copy has 8 or 4 bits a weight");
  q_.assign(rows_ * row_bytes_, 0);
  scale_.assign(rows_, 0.0f);
  bias_.assign(rows_, 0.0f);
}

void RouterCopy::assign(const Matrix& gate, const float* bias) {
  if (gate.rows != rows_ || gate.cols != cols_) throw std::invalid_argument("a router of another shape");
  const float top = bits_ == 8 ? 127.0f : 7.0f;
  // Element c of row r widened exactly, read in place (no row buffer: nothing to allocate).
  const auto weight = [&](std::size_t r, std::size_t c) {
    return gate.f32 ? gate.fp32()[r * cols_ + c] : bf16_to_f32(gate.bf16()[r * cols_ + c]);
  };
  for (std::size_t r = 0; r < rows_; ++r) {
    float amax = 0.0f;
    for (std::size_t c = 0; c < cols_; ++c) amax = std::max(amax, std::fabs(weight(r, c)));
    const float scale = amax > 0.0f ? amax / top : 1.0f;
    scale_[r] = scale;
    std::int8_t* q = q_.data() + r * row_bytes_;
    for (std::size_t c = 0; c < cols_; ++c) {
      const auto v = static_cast<int>(std::lround(std::clamp(weight(r, c) / scale, -top, top)));
      if (bits_ == 8) {
        q[c] = static_cast<std::int8_t>(v);
      } else {
        const auto nibble = static_cast<std::uint8_t>(v & 0xF);
        auto& byte = reinterpret_cast<std::uint8_t&>(q[c / 2]);
        byte = c % 2 == 0 ? static_cast<std::uint8_t>((byte & 0xF0) | nibble)
                          : static_cast<std::uint8_t>((byte & 0x0F) | (nibble << 4));
      }
    }
    bias_[r] = bias[r];
  }
  filled_ = true;
}

void RouterCopy::logits(const float* x, std::size_t T, float* out) const noexcept {
  for (std::size_t t = 0; t < T; ++t) {
    const float* xt = x + t * cols_;
    for (std::size_t r = 0; r < rows_; ++r) {
      const std::int8_t* q = q_.data() + r * row_bytes_;
      float sum = 0.0f;
      if (bits_ == 8) {
        for (std::size_t c = 0; c < cols_; ++c) sum += static_cast<float>(q[c]) * xt[c];
      } else {
        for (std::size_t c = 0; c < cols_; ++c) {
          const auto byte = static_cast<std::uint8_t>(q[c / 2]);
          const int nibble = c % 2 == 0 ? byte & 0xF : byte >> 4;
          sum += static_cast<float>(nibble >= 8 ? nibble - 16 : nibble) * xt[c];
        }
      }
      out[t * rows_ + r] = sum * scale_[r];
    }
  }
}

}  // namespace k3::maths
