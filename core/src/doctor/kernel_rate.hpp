// The kernel set's matrix-product rate, in weight bytes multiplied per second, for a decoded
// token's shapes (batch 1): BF16 trunk matrices and MXFP4 routed experts of the model.
#pragma once
#include <k3/kernels.hpp>
#include <k3/model_config.hpp>

namespace k3::doctor {

struct KernelRates {
  double bf16_bytes_per_second = 0;
  double mxfp4_bytes_per_second = 0;
};

/// Multiplies a pool of distinct matrices larger than the CPU caches (weights come from
/// memory, as in a run) for `seconds` in all, rows split over `threads` OpenMP threads as
/// the forward pass splits them. The values are random but finite (no NaN or subnormal
/// slow paths).
KernelRates measure_kernel_rates(const sdk::KernelSet& kernels, const ModelConfig& config, int threads, double seconds);

}  // namespace k3::doctor
