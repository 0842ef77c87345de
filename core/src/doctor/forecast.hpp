// The doctor's forecast of one plan (docs/doctor.md, "The forecast"): the bytes a decoded
// token reads from storage, and its seconds from the measured disk and kernel rates.
#pragma once
#include <k3/doctor.hpp>
#include <k3/model_config.hpp>
#include <k3/plan.hpp>

namespace k3::doctor {

/// What was measured; a rate of 0 leaves that part of the forecast at 0.
struct Rates {
  double disk_bytes_per_second = 0;
  double bf16_bytes_per_second = 0;
  double mxfp4_bytes_per_second = 0;
};

/// Fills the per-token bytes and seconds of `f` from `plan` (for `config`) and `rates`.
/// `usable` is the memory the plan must fit in with kDoctorMemoryMargin.
void forecast(DoctorForecast& f, const ModelConfig& config, const MemoryPlan& plan, const Rates& rates,
              std::uint64_t usable);

}  // namespace k3::doctor
