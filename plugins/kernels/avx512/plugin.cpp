// The avx512 kernel set: descriptor, score and factory. Baseline flags only: the host
// dlopens this library and calls score() on every x86-64 CPU, AVX-512 or not.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <k3/plugin.hpp>

#include "avx512_ops.hpp"

namespace {

using k3::kernels::avx512::ops;

/// Forwards every op to the table in avx512_kernels.cpp (same partition and tree as scalar).
class Avx512Kernels final : public k3::sdk::KernelSet {
 public:
  [[nodiscard]] std::string_view name() const noexcept override { return "avx512"; }
  void matmul_bf16(const std::uint16_t* w, std::size_t rows, std::size_t cols, k3::sdk::RowRange range,
                   const float* x, std::size_t batch, float* y) const noexcept override {
    ops.matmul_bf16(w, rows, cols, range, x, batch, y);
  }
  void matmul_f32(const float* w, std::size_t rows, std::size_t cols, k3::sdk::RowRange range, const float* x,
                  std::size_t batch, float* y) const noexcept override {
    ops.matmul_f32(w, rows, cols, range, x, batch, y);
  }
  void matmul_mxfp4(const k3::sdk::Mxfp4Matrix& w, k3::sdk::RowRange range, const float* x, std::size_t batch,
                    float* y) const noexcept override {
    ops.matmul_mxfp4(w, range, x, batch, y);
  }
  [[nodiscard]] double dot_f32(const float* a, const float* b, std::size_t n) const noexcept override {
    return ops.dot_f32(a, b, n);
  }
};

/// Preference among kernel sets: scalar 1 < avx2 2 < avx512 3; 0 = cannot run here.
int score() { return k3::kernels::avx512::cpu_supported() ? 3 : 0; }

k3::sdk::Status make_kernel_set(const k3::sdk::CreateArgs& args, std::unique_ptr<k3::sdk::KernelSet>& out,
                                std::vector<std::string>& unknown_params) {
  k3::sdk::ParamReader params(args.params);
  unknown_params = params.unused();
  // Asked for by name on a CPU without AVX-512: a configuration error, never a quiet fallback.
  if (!k3::kernels::avx512::cpu_supported())
    return k3::sdk::Status::error(k3::sdk::StatusCode::unsupported,
                                  "kernel set avx512: this CPU (or its OS) lacks AVX2, FMA, AVX-512F or AVX-512BW");
  out = std::make_unique<Avx512Kernels>();
  return k3::sdk::Status::success();
}

}  // namespace

K3_PLUGIN(kernels, "avx512", "1.0.0", make_kernel_set, score)
