// The neon kernel set: descriptor, score and factory. Built for the AArch64 baseline: the host
// dlopens this library and calls score() on every aarch64 CPU.
#include <k3/plugin.hpp>

#include "../common/op_table_kernel_set.hpp"
#include "../common/simd_sets.hpp"

namespace {

/// Preference among kernel sets: scalar 1 < neon 2; 0 = cannot run here.
int score() { return k3::kernels::neon::cpu_supported() ? 2 : 0; }

k3::sdk::Status make_kernel_set(const k3::sdk::CreateArgs& args, std::unique_ptr<k3::sdk::KernelSet>& out,
                                std::vector<std::string>& unknown_params) {
  return k3::kernels::make_op_table_kernel_set(args, out, unknown_params, "neon", k3::kernels::neon::ops,
                                               k3::kernels::neon::cpu_supported(), "Advanced SIMD");
}

}  // namespace

K3_PLUGIN(kernels, "neon", "1.0.0", make_kernel_set, score)
K3_PLUGIN_NO_PARAMS()
