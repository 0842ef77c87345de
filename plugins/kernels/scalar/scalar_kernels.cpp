// The `scalar` kernel set: the KernelSet interface over the reference loops in
// scalar_ops.hpp. Baseline ISA only, so it can run on every CPU (score 1, the lowest
// runnable score: any SIMD set that can run is preferred).
#include <memory>
#include <string>
#include <vector>

#include <k3/plugin.hpp>

#include "scalar_ops.hpp"

namespace {

namespace ops = k3::kernels::scalar;
using k3::sdk::Mxfp4Matrix;
using k3::sdk::RowRange;

class ScalarKernels final : public k3::sdk::KernelSet {
 public:
  [[nodiscard]] std::string_view name() const noexcept override { return "scalar"; }

  void matmul_bf16(const std::uint16_t* w, std::size_t rows, std::size_t cols, RowRange range, const float* x,
                   std::size_t batch, float* y) const noexcept override {
    ops::matmul_bf16(w, rows, cols, range, x, batch, y);
  }

  void matmul_f32(const float* w, std::size_t rows, std::size_t cols, RowRange range, const float* x, std::size_t batch,
                  float* y) const noexcept override {
    ops::matmul_f32(w, rows, cols, range, x, batch, y);
  }

  void matmul_mxfp4(const Mxfp4Matrix& w, RowRange range, const float* x, std::size_t batch,
                    float* y) const noexcept override {
    ops::matmul_mxfp4(w, range, x, batch, y);
  }

  [[nodiscard]] double dot_f32(const float* a, const float* b, std::size_t n) const noexcept override {
    return ops::dot_f32(a, b, n);
  }
};

}  // namespace

// The factory has external linkage (hidden by -fvisibility=hidden): it is only named as a
// template argument of K3_PLUGIN, which GCC does not count as a use of an internal function.
namespace k3::kernels::scalar_set {

k3::sdk::Status create(const k3::sdk::CreateArgs& args, std::unique_ptr<k3::sdk::KernelSet>& out,
                       std::vector<std::string>& unknown_params) {
  const k3::sdk::ParamReader params(args.params, {});  // the set takes no parameters
  unknown_params = params.unused();
  out = std::make_unique<ScalarKernels>();
  return k3::sdk::Status::success();
}

int score() { return 1; }

}  // namespace k3::kernels::scalar_set

K3_PLUGIN(kernels, "scalar", "1.0.0", k3::kernels::scalar_set::create, k3::kernels::scalar_set::score)
K3_PLUGIN_NO_PARAMS()
