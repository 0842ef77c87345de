// The avx2 kernel set: descriptor, score and factory. Baseline flags only: the host
// dlopens this library and calls score() on every x86-64 CPU, AVX2 or not.
#include <k3/plugin.hpp>

#include "../common/op_table_kernel_set.hpp"
#include "../common/simd_sets.hpp"

namespace {

/// Preference among kernel sets: scalar 1 < avx2 2 < avx512 3; 0 = cannot run here.
int score() { return k3::kernels::avx2::cpu_supported() ? 2 : 0; }

k3::sdk::Status make_kernel_set(const k3::sdk::CreateArgs& args, std::unique_ptr<k3::sdk::KernelSet>& out,
                                std::vector<std::string>& unknown_params) {
  return k3::kernels::make_op_table_kernel_set(args, out, unknown_params, "avx2", k3::kernels::avx2::ops,
                                               k3::kernels::avx2::cpu_supported(), "AVX2 or FMA");
}

}  // namespace

K3_PLUGIN(kernels, "avx2", "1.0.0", make_kernel_set, score)
K3_PLUGIN_NO_PARAMS()
