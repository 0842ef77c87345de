// MXFP4 decoding straight from packed nibbles (docs/model-spec.md §4), on hand-built bytes with
// hand-computed results, for every kernel set that can run here.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "kernel_sets.hpp"
#include "reference.hpp"

using k3test::bits_of;
using k3test::Mxfp4Owned;

namespace {

// docs/model-spec.md §4, copied by hand.
constexpr double kSpecE2M1[16] = {0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6};

float run_row(const k3::sdk::KernelSet& set, const Mxfp4Owned& m, const std::vector<float>& x, std::size_t row = 0) {
  std::vector<float> y(m.rows, std::numeric_limits<float>::quiet_NaN());
  set.matmul_mxfp4(m.view(), {0, m.rows}, x.data(), 1, y.data());
  return y[row];
}

}  // namespace

TEST_CASE("test-side E2M1 formula matches the table in docs/model-spec.md", "[kernels][mxfp4]") {
  for (unsigned code = 0; code < 16; ++code) {
    INFO("code " << code);
    CHECK(bits_of(k3test::e2m1_value(code)) == bits_of(kSpecE2M1[code]));
  }
  CHECK(k3test::mxfp4_scale_value(127) == 1.0);
  CHECK(k3test::mxfp4_scale_value(128) == 2.0);
  CHECK(k3test::mxfp4_scale_value(0) == std::ldexp(1.0, -127));
  CHECK(k3test::mxfp4_scale_value(254) == std::ldexp(1.0, 127));
  CHECK(k3test::mxfp4_scale_value(255) == 0.0);
}

TEST_CASE("every E2M1 code decodes to the spec value in both nibbles", "[kernels][mxfp4]") {
  for (const auto& [name, set] : k3test::runnable_kernel_sets()) {
    for (unsigned code = 0; code < 16; ++code) {
      for (std::size_t col : {std::size_t{6}, std::size_t{7}}) {  // low nibble, then high nibble
        INFO("set " << name << ", code " << code << ", column " << col);
        Mxfp4Owned m(1, 32);
        m.set_code(0, col, code);
        std::vector<float> x(32, 0.0f);
        x[col] = 1.0f;
        const float y = run_row(*set, m, x);
        CHECK(y == static_cast<float>(kSpecE2M1[code]));
        // The accumulators start at +0.0, so code 8 (−0) gives +0, never −0.
        if (code == 0 || code == 8) CHECK(bits_of(y) == 0u);
      }
    }
  }
}

TEST_CASE("low nibble is the even column, and odd column counts use ceil(cols/2) bytes per row", "[kernels][mxfp4]") {
  // Two rows of 5 columns: 3 packed bytes and 1 scale per row. The high nibble of each
  // row's last byte is padding and holds a large code that must never be read.
  Mxfp4Owned m(2, 5);
  m.packed = {0x21, 0x9F, 0x70,   // row 0: codes 1, 2, F, 9, 0  (pad 7 = 6.0)
              0x0A, 0x00, 0xE0};  // row 1: codes A, 0, 0, 0, 0  (pad E = -4.0)
  m.scales = {127, 128};          // ×1, ×2
  const std::vector<float> x = {1.0f, 10.0f, 100.0f, 1000.0f, 10000.0f};
  // Row 0: 0.5·1 + 1·10 − 6·100 − 0.5·1000 + 0·10000 = −1089.5
  // Row 1: −1·2·1 = −2
  for (const auto& [name, set] : k3test::runnable_kernel_sets()) {
    INFO("set " << name);
    std::vector<float> y(2, std::numeric_limits<float>::quiet_NaN());
    set->matmul_mxfp4(m.view(), {0, 2}, x.data(), 1, y.data());
    CHECK(y[0] == -1089.5f);
    CHECK(y[1] == -2.0f);
  }
}

TEST_CASE("scale byte 255 makes its whole group contribute zero", "[kernels][mxfp4]") {
  // 70 columns: groups of 32, 32 and 6; every code is 7 (6.0) and every x is 1.
  Mxfp4Owned m(2, 70);
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t c = 0; c < 70; ++c) m.set_code(r, c, 7);
  m.scales = {127, 255, 126,   // row 0: ×1, zero, ×0.5
              255, 255, 255};  // row 1: every group zero
  const std::vector<float> x(70, 1.0f);
  // Row 0: 32·6·1 + 0 + 6·6·0.5 = 192 + 18 = 210. Row 1: +0.
  for (const auto& [name, set] : k3test::runnable_kernel_sets()) {
    INFO("set " << name);
    std::vector<float> y(2, std::numeric_limits<float>::quiet_NaN());
    set->matmul_mxfp4(m.view(), {0, 2}, x.data(), 1, y.data());
    CHECK(y[0] == 210.0f);
    CHECK(bits_of(y[1]) == 0u);
  }
}

TEST_CASE("scale extremes 0 and 254 are exact in fp64 and rounded once to fp32", "[kernels][mxfp4]") {
  struct Case {
    const char* what;
    unsigned code;
    std::uint8_t scale;
    float x;
    float expected;  // by hand
  };
  const float inf = std::numeric_limits<float>::infinity();
  const Case cases[] = {
      {"0.5·2^-127·1 = 2^-128, an fp32 subnormal", 1, 0, 1.0f, std::ldexp(1.0f, -128)},
      {"6·2^-127·2^100 = 0.75·2^-24", 7, 0, std::ldexp(1.0f, 100), std::ldexp(0.75f, -24)},
      {"1·2^127·0.5 = 2^126", 2, 254, 0.5f, std::ldexp(1.0f, 126)},
      {"−6·2^127·2^-100 = −1.5·2^29", 15, 254, std::ldexp(1.0f, -100), -std::ldexp(1.5f, 29)},
      {"6·2^127·1 = 1.5·2^129 overflows fp32 to +inf", 7, 254, 1.0f, inf},
      {"0.5·2^-127·2^-149 = 2^-277 underflows fp32 to +0", 1, 0, std::ldexp(1.0f, -149), 0.0f},
  };
  for (const auto& [name, set] : k3test::runnable_kernel_sets()) {
    for (const Case& c : cases) {
      INFO("set " << name << ": " << c.what);
      Mxfp4Owned m(1, 3);
      m.set_code(0, 1, c.code);
      m.scales = {c.scale};
      const std::vector<float> x = {0.0f, c.x, 0.0f};
      CHECK(bits_of(run_row(*set, m, x)) == bits_of(c.expected));
    }
  }
}

TEST_CASE("MXFP4 products beyond the fp32 range cancel exactly in fp64", "[kernels][mxfp4]") {
  // Group 0 (scale 254): 6·2^127·2^127 = 1.5·2^256 and −6·2^127·2^127 cancel exactly;
  // a kernel summing in fp32 would get inf − inf = NaN. Group 1 (scale 0): 1·2^-127·2^120
  // = 2^-7 rides along, and group 2 (scale 254) adds 1·2^127·2^-120 = 2^7. Total 128 + 2^-7.
  Mxfp4Owned m(1, 66);
  m.set_code(0, 0, 7);
  m.set_code(0, 8, 15);  // same accumulator as column 0, so the cancellation is in one lane
  m.set_code(0, 33, 2);
  m.set_code(0, 64, 2);
  m.scales = {254, 0, 254};
  std::vector<float> x(66, 0.0f);
  x[0] = x[8] = std::ldexp(1.0f, 127);
  x[33] = std::ldexp(1.0f, 120);
  x[64] = std::ldexp(1.0f, -120);
  for (const auto& [name, set] : k3test::runnable_kernel_sets()) {
    INFO("set " << name);
    CHECK(run_row(*set, m, x) == 128.0078125f);
  }
}
