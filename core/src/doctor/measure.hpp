// The doctor's measurements, each on the shapes of the model it forecasts (docs/doctor.md,
// "Disk" and "Compute"): the disk read in requests of each model's expert slot, and the
// kernel set multiplying each model's matrices. Models with the same shapes share one test.
#pragma once
#include <filesystem>
#include <vector>

#include <k3/kernels.hpp>

#include "doctor/context.hpp"

namespace k3::doctor {

/// Sets each model's expert slot (disk_request_bytes) and kernel shapes from its config.
void set_shapes(const Context& c, std::vector<ModelToForecast>& models);

/// One disk test in `folder` (the checkpoint's shards when they serve the size, else a
/// temporary file) per distinct slot size, the pipeline's model first, --seconds in all;
/// then the page cache's share of the shards. Fills the report's disks and each model's
/// disk rate; a failed read is an error finding.
void measure_disks(const Context& c, const std::filesystem::path& folder, std::vector<ModelToForecast>& models);

/// The kernel set's rates on each distinct set of model shapes, compute_seconds each.
void measure_compute(const Context& c, const sdk::KernelSet& kernels, std::vector<ModelToForecast>& models);

}  // namespace k3::doctor
