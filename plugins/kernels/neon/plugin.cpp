// The neon kernel set: descriptor, score and factory. Built for the AArch64 baseline: the host
// dlopens this library and calls score() on every aarch64 CPU.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <k3/plugin.hpp>

#include "neon_ops.hpp"

namespace {

using k3::kernels::neon::ops;

/// Forwards every op to the table in neon_kernels.cpp (same partition and tree as scalar).
class NeonKernels final : public k3::sdk::KernelSet {
 public:
  [[nodiscard]] std::string_view name() const noexcept override { return "neon"; }
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

/// Preference among kernel sets: scalar 1 < neon 2; 0 = cannot run here.
int score() { return k3::kernels::neon::cpu_supported() ? 2 : 0; }

k3::sdk::Status make_kernel_set(const k3::sdk::CreateArgs& args, std::unique_ptr<k3::sdk::KernelSet>& out,
                                std::vector<std::string>& unknown_params) {
  k3::sdk::ParamReader params(args.params);
  unknown_params = params.unused();
  // Asked for by name on a CPU without Advanced SIMD: a configuration error, never a quiet fallback.
  if (!k3::kernels::neon::cpu_supported())
    return k3::sdk::Status::error(k3::sdk::StatusCode::unsupported,
                                  "kernel set neon: this CPU (or its OS) lacks Advanced SIMD");
  out = std::make_unique<NeonKernels>();
  return k3::sdk::Status::success();
}

}  // namespace

K3_PLUGIN(kernels, "neon", "1.0.0", make_kernel_set, score)
