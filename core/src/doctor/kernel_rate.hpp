// The kernel set's matrix-product rate, in weight bytes multiplied per second, for a decoded
// token's shapes (batch 1): BF16 trunk matrices and MXFP4 routed experts of one model. Each
// model is measured on its own shapes (docs/doctor.md, "Compute"), so a forecast never
// borrows another model's rates: a pipeline's 64-wide experts multiply at a rate that says
// nothing about K3's.
#pragma once
#include <cstddef>

#include <k3/doctor.hpp>
#include <k3/kernels.hpp>
#include <k3/model_config.hpp>

namespace k3::doctor {

/// The shapes measured for `config`: one dense-FFN matrix (intermediate × hidden, its rows
/// capped so one matrix is at most 32 MiB) and one routed expert (gate and up [I, L], down
/// [L, I]), all taken from the config.
DoctorKernelShapes kernel_shapes(const ModelConfig& config);

/// Bytes of an MXFP4 matrix of `shape`: its packed nibbles, and its scales (one per 32 columns).
std::size_t packed_bytes(const DoctorShape& shape);
std::size_t scale_bytes(const DoctorShape& shape);

struct KernelRates {
  double bf16_bytes_per_second = 0;
  double mxfp4_bytes_per_second = 0;
};

/// Multiplies a pool of distinct matrices larger than the CPU caches (weights come from
/// memory, as in a run) for `seconds` in all, half BF16 and half MXFP4, rows split over
/// `threads` OpenMP threads as the forward pass splits them. The values are random but
/// finite (no NaN or subnormal slow paths).
KernelRates measure_kernel_rates(const sdk::KernelSet& kernels, const DoctorKernelShapes& shapes, int threads,
                                 double seconds);

}  // namespace k3::doctor
