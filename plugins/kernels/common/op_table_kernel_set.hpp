// The KernelSet a SIMD plugin hands the host: it forwards every op to the set's OpTable,
// and the shared factory body refuses a set this CPU cannot run (a configuration error,
// never a quiet fallback to scalar). Included only by baseline-flag translation units.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <k3/host.hpp>
#include <k3/kernels.hpp>
#include <k3/status.hpp>

#include "op_table.hpp"

namespace k3::kernels {

class OpTableKernelSet final : public sdk::KernelSet {
 public:
  OpTableKernelSet(std::string_view name, const OpTable& ops) : name_(name), ops_(ops) {}
  [[nodiscard]] std::string_view name() const noexcept override { return name_; }
  void matmul_bf16(const std::uint16_t* w, std::size_t rows, std::size_t cols, sdk::RowRange range, const float* x,
                   std::size_t batch, float* y) const noexcept override {
    ops_.matmul_bf16(w, rows, cols, range, x, batch, y);
  }
  void matmul_f32(const float* w, std::size_t rows, std::size_t cols, sdk::RowRange range, const float* x,
                  std::size_t batch, float* y) const noexcept override {
    ops_.matmul_f32(w, rows, cols, range, x, batch, y);
  }
  void matmul_mxfp4(const sdk::Mxfp4Matrix& w, sdk::RowRange range, const float* x, std::size_t batch,
                    float* y) const noexcept override {
    ops_.matmul_mxfp4(w, range, x, batch, y);
  }
  [[nodiscard]] double dot_f32(const float* a, const float* b, std::size_t n) const noexcept override {
    return ops_.dot_f32(a, b, n);
  }

 private:
  std::string_view name_;
  const OpTable& ops_;
};

/// The factory body of a SIMD set: no parameters (all are reported unknown); `unsupported`
/// with `missing` in the message when cpu_supported is false.
inline sdk::Status make_op_table_kernel_set(const sdk::CreateArgs& args, std::unique_ptr<sdk::KernelSet>& out,
                                            std::vector<std::string>& unknown_params, std::string_view name,
                                            const OpTable& ops, bool cpu_supported, const char* missing) {
  const sdk::ParamReader params(args.params, {});  // a kernel set takes no parameters
  unknown_params = params.unused();
  if (!cpu_supported)
    return sdk::Status::error(sdk::StatusCode::unsupported,
                              "kernel set " + std::string(name) + ": this CPU (or its OS) lacks " + missing);
  out = std::make_unique<OpTableKernelSet>(name, ops);
  return sdk::Status::success();
}

}  // namespace k3::kernels
