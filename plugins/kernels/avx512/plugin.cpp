// The avx512 kernel set: descriptor, score and factory. Baseline flags only: the host
// dlopens this library and calls score() on every x86-64 CPU, AVX-512 or not.
#include <k3/plugin.hpp>

#include "../common/op_table_kernel_set.hpp"
#include "../common/simd_sets.hpp"

namespace {

/// Preference among kernel sets: scalar 1 < avx2 2 < avx512 3; 0 = cannot run here.
int score() { return k3::kernels::avx512::cpu_supported() ? 3 : 0; }

k3::sdk::Status make_kernel_set(const k3::sdk::CreateArgs& args, std::unique_ptr<k3::sdk::KernelSet>& out,
                                std::vector<std::string>& unknown_params) {
  return k3::kernels::make_op_table_kernel_set(args, out, unknown_params, "avx512", k3::kernels::avx512::ops,
                                               k3::kernels::avx512::cpu_supported(),
                                               "AVX2, FMA, AVX-512F or AVX-512BW");
}

}  // namespace

K3_PLUGIN(kernels, "avx512", "1.0.0", make_kernel_set, score)
K3_PLUGIN_NO_PARAMS()
