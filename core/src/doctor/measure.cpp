// set_shapes(), measure_disks(), measure_compute() (measure.hpp). The K3 forecast must not
// depend on the model a pipeline names: reading a disk in 8 kB requests or multiplying
// 64-wide experts says little about 17.55 MB reads and 7168-wide rows, so each model is
// measured on its own request size and matrices, all taken from its config.
#include "doctor/measure.hpp"

#include <algorithm>

#include <k3/error.hpp>
#include <k3/plan.hpp>
#include <k3/units.hpp>

#include "doctor/kernel_rate.hpp"
#include "doctor/report_format.hpp"

namespace k3::doctor {

namespace fs = std::filesystem;

namespace {

int code_of(const Error& e) { return static_cast<int>(e.code()); }

/// "fortune" or "fortune and k3": the models that share a measurement.
std::string names_of(const std::vector<ModelToForecast>& models, auto same) {
  std::string out;
  for (const auto& m : models)
    if (same(m)) out += (out.empty() ? "" : " and ") + m.info.name;
  return out;
}

std::string per_second(double v) { return format_bytes(static_cast<std::uint64_t>(v)) + "/s"; }

std::string shape_text(const DoctorShape& s) { return std::to_string(s.rows) + " x " + std::to_string(s.cols); }

}  // namespace

void set_shapes(const Context& c, std::vector<ModelToForecast>& models) {
  for (auto& m : models) {
    m.info.measured.shapes = kernel_shapes(m.config);
    // The expert cache reads one expert as its 4096-aligned slot.
    PlanInputs in = plan_inputs(c.p);
    in.available = 1ull << 40;
    try {
      m.info.measured.disk_request_bytes = std::max<std::uint64_t>(4096, plan_memory(m.config, in).expert_slot_bytes);
    } catch (const Error&) {
      m.info.measured.disk_request_bytes = 1u << 20;  // the plan's own error is reported with the presets
    }
  }
}

void measure_disks(const Context& c, const fs::path& folder, std::vector<ModelToForecast>& models) {
  DoctorReport& r = c.r;
  std::vector<std::uint64_t> sizes;
  for (const auto& m : models)
    if (std::find(sizes.begin(), sizes.end(), m.info.measured.disk_request_bytes) == sizes.end())
      sizes.push_back(m.info.measured.disk_request_bytes);
  if (sizes.empty()) sizes.push_back(1u << 20);
  machine::DiskBenchOptions bo;
  bo.files = r.shards;
  bo.scratch_folder = folder;
  bo.seconds = c.o.seconds;
  bo.depths = {1, c.o.io_depth};
  std::string what;
  for (const auto s : sizes) {
    const std::string who =
        names_of(models, [&](const ModelToForecast& m) { return m.info.measured.disk_request_bytes == s; });
    what += (what.empty() ? "" : ", ") + format_bytes(s) + (who.empty() ? "" : " requests (" + who + ")");
  }
  c.status("reading " + folder.string() + " for " + fixed(c.o.seconds, 1) + " s: " + what + ", O_DIRECT");
  try {
    r.disks = machine::bench_disk(bo, sizes);
  } catch (const Error& e) {
    r.disk_skipped = e.what();
    c.add("disk", DoctorSeverity::error, std::string("the read test failed: ") + e.what(), code_of(e));
    return;
  }
  for (const auto& d : r.disks) {
    const std::string who = names_of(models, [&](const ModelToForecast& m) {
      return m.info.measured.disk_request_bytes == d.request_bytes;
    });
    const bool in_memory = d.filesystem == "tmpfs" || d.filesystem == "ramfs";
    const std::string line = std::string(d.o_direct ? "O_DIRECT" : "buffered") + " reads of " +
                             format_bytes(d.request_bytes) + (who.empty() ? "" : " (one expert of " + who + ")") +
                             " on " + d.filesystem + ": " + per_second(d.best_bytes_per_second()) +
                             (in_memory ? " (this file system is memory)" : "");
    if (d.direct_refused)
      c.add("disk", DoctorSeverity::warning,
            "the checkpoint's shards cannot be read with O_DIRECT: " + d.note + "; " + line);
    else
      c.add("disk", DoctorSeverity::ok, line + (d.temporary_file ? " (" + d.note + ")" : ""));
    for (auto& m : models)
      if (m.info.measured.disk_request_bytes == d.request_bytes)
        m.info.measured.disk_bytes_per_second = d.best_bytes_per_second();
  }
  if (!r.shards.empty()) {
    r.page_cache = machine::page_cache_state(r.shards);
    const auto& pc = r.page_cache;
    c.add("page_cache", DoctorSeverity::ok,
          format_bytes(pc.resident) + " of the checkpoint's " + format_bytes(pc.bytes) + " is in the page cache (" +
              fixed(pc.bytes ? 100.0 * static_cast<double>(pc.resident) / static_cast<double>(pc.bytes) : 0, 1) + "%)");
  }
}

void measure_compute(const Context& c, const sdk::KernelSet& kernels, std::vector<ModelToForecast>& models) {
  const DoctorReport& r = c.r;
  for (std::size_t i = 0; i < models.size(); ++i) {
    DoctorMeasurement& m = models[i].info.measured;
    const auto earlier = std::find_if(models.begin(), models.begin() + static_cast<std::ptrdiff_t>(i),
                                      [&](const ModelToForecast& e) { return e.info.measured.shapes == m.shapes; });
    if (earlier != models.begin() + static_cast<std::ptrdiff_t>(i)) {  // the same shapes: the same rates
      m.bf16_bytes_per_second = earlier->info.measured.bf16_bytes_per_second;
      m.mxfp4_bytes_per_second = earlier->info.measured.mxfp4_bytes_per_second;
      continue;
    }
    const DoctorKernelShapes& s = m.shapes;
    std::string experts;
    for (const auto& e : s.expert) experts += (experts.empty() ? "" : ", ") + shape_text(e);
    const std::string shapes =
        "BF16 " + shape_text(s.bf16) +
        (s.bf16.rows < s.bf16_rows_of_model ? " (of " + std::to_string(s.bf16_rows_of_model) + " rows)" : "") +
        ", MXFP4 experts of " + experts;
    c.status("measuring kernel set " + r.kernels_chosen + " on " + std::to_string(r.threads) + " threads, " +
             models[i].info.name + "'s shapes: " + shapes);
    const KernelRates k = measure_kernel_rates(kernels, s, r.threads, c.o.compute_seconds);
    m.bf16_bytes_per_second = k.bf16_bytes_per_second;
    m.mxfp4_bytes_per_second = k.mxfp4_bytes_per_second;
    c.add("compute", DoctorSeverity::ok,
          r.kernels_chosen + " on " + std::to_string(r.threads) + " threads, " +
              names_of(models, [&](const ModelToForecast& x) { return x.info.measured.shapes == s; }) + "'s shapes (" +
              shapes + "): " + per_second(k.bf16_bytes_per_second) + " of BF16 weights, " +
              per_second(k.mxfp4_bytes_per_second) + " of MXFP4 weights multiplied");
  }
}

}  // namespace k3::doctor
