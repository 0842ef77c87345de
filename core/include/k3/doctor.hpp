// `k3host doctor` (docs/doctor.md): what this machine can do for K3 with a given pipeline.
// It probes the CPU (the ISA extensions the kernel sets test, and which set the host picks),
// the cores and memory and their cgroup limits, the OpenMP wait policy in effect, the disk
// under model.path and how much of the checkpoint the page cache holds. Then, for the
// pipeline's model and for the released K3, each on its own shapes: the disk's rate for
// random O_DIRECT reads of one of its routed experts and the kernel set's matrix-product
// rate on its matrices; it plans every preset (presets/*.yaml) for it, recommends the
// largest whose plan fits the usable memory with a margin, and predicts each one's seconds
// per token from the plan's bytes per token and that model's rates. So the K3 forecast is
// the same whatever model the pipeline names.
//
//   k3::DoctorReport r = k3::run_doctor(pipeline, options);
//   std::fputs(r.text().c_str(), stdout);   // or r.json()
//   return r.exit_code();                   // 0 ok, 6 warnings only, else the first error's code
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <k3/machine.hpp>

namespace k3 {

class Pipeline;

/// A preset fits "with margin" when its plan needs at most this share of the usable memory
/// (the share `fit` budgets take too: the rest is for the page cache and the system).
inline constexpr double kDoctorMemoryMargin = 0.9;

struct DoctorOptions {
  double seconds = 3;                   ///< the disk tests in all: split between the models' request sizes, then depths
  unsigned io_depth = 8;                ///< requests in flight in the second pass
  double compute_seconds = 0.5;         ///< the kernel-rate test per model, split between bf16 and MXFP4
  std::optional<double> assume_ram_gb;  ///< plan against this usable memory (GB) instead of measuring
  std::filesystem::path presets_dir;    ///< the presets/*.yaml to choose from
  bool full_model = true;               ///< also forecast the released K3 (geometry k3)
  std::function<void(const std::string&)> on_status;  ///< a line before each slow step; may be empty
};

enum class DoctorSeverity { ok, warning, error };
const char* to_string(DoctorSeverity s) noexcept;

struct DoctorFinding {
  std::string section;  ///< cpu, kernels, cores, memory, openmp, disk, page_cache, compute, model, presets
  DoctorSeverity severity = DoctorSeverity::ok;
  std::string message;
  int exit_code = 0;  ///< errors: the exit code a run of this pipeline would end with
};

/// One plan and its forecast.
struct DoctorForecast {
  std::string name;  ///< the preset ("laptop"), or "pipeline" for the pipeline as given
  std::filesystem::path file;
  bool fixed_budgets = true;      ///< false when a budget is "fit" (sized from the memory)
  std::string error;              ///< the plan could not be made (a budget below its minimum)
  std::uint64_t total_bytes = 0;  ///< the plan's total
  bool fits = false;              ///< total ≤ kDoctorMemoryMargin × usable memory
  bool resident = false;          ///< nothing streams
  // Per token, read from storage (docs/doctor.md "The forecast").
  std::uint64_t trunk_bytes = 0;   ///< every streamed trunk layer, whole
  std::uint64_t expert_bytes = 0;  ///< top-k experts per MoE layer that miss the cache
  std::uint64_t table_bytes = 0;   ///< an embedding row, and lm_head when it streams
  double expert_hit_rate = 0;      ///< forecast: cache slots ÷ routed experts
  // Per token, seconds; 0 when the rate was not measured.
  double io_seconds = 0;         ///< bytes ÷ the disk's best measured bandwidth
  double compute_seconds = 0;    ///< weights multiplied ÷ the kernel set's measured rates
  double seconds_per_token = 0;  ///< max(io, compute)
  [[nodiscard]] std::uint64_t bytes_per_token() const { return trunk_bytes + expert_bytes + table_bytes; }
};

/// A matrix shape measured by the compute test.
struct DoctorShape {
  std::size_t rows = 0;
  std::size_t cols = 0;
};

/// The shapes a model's kernel rates are measured on (core/src/doctor/kernel_rate.cpp),
/// taken from its config.
struct DoctorKernelShapes {
  DoctorShape bf16;                              ///< a dense-FFN matrix (intermediate × hidden), rows capped at 32 MiB
  std::size_t bf16_rows_of_model = 0;            ///< the model's intermediate size (the uncapped rows)
  std::vector<DoctorShape> expert;               ///< one routed expert, MXFP4: gate [I, L], up [I, L], down [L, I]
  [[nodiscard]] std::size_t bf16_bytes() const;  ///< one BF16 matrix
  [[nodiscard]] std::size_t expert_bytes() const;  ///< one expert's packed nibbles and scales
  [[nodiscard]] bool operator==(const DoctorKernelShapes& o) const {
    auto same = [](const std::vector<DoctorShape>& a, const std::vector<DoctorShape>& b) {
      if (a.size() != b.size()) return false;
      for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].rows != b[i].rows || a[i].cols != b[i].cols) return false;
      return true;
    };
    return bf16.rows == o.bf16.rows && bf16.cols == o.bf16.cols && bf16_rows_of_model == o.bf16_rows_of_model &&
           same(expert, o.expert);
  }
};

/// What a model's forecast was computed from: the disk read in requests of its own expert
/// slot, and the kernel set on its own shapes. Two models with the same shapes share one
/// measurement; a model never borrows another's.
struct DoctorMeasurement {
  std::uint64_t disk_request_bytes = 0;  ///< its 4096-aligned expert slot (0: the disk was not read)
  double disk_bytes_per_second = 0;      ///< the best pass of that test
  DoctorKernelShapes shapes;
  double bf16_bytes_per_second = 0;  ///< weights multiplied per second, the run's threads
  double mxfp4_bytes_per_second = 0;
};

struct DoctorModel {
  std::string name;                     ///< geometry or checkpoint folder name
  std::string source;                   ///< "checkpoint <uri>" or "geometry <file>"
  bool primary = false;                 ///< the pipeline's own model (errors count only here)
  DoctorMeasurement measured;           ///< the rates its forecasts use
  std::vector<DoctorForecast> presets;  ///< smallest first (list_presets order)
  DoctorForecast pipeline;              ///< the pipeline's own memory section
  std::string recommended;              ///< empty when no preset fits
};

struct DoctorReport {
  std::filesystem::path pipeline_file;
  machine::CpuInfo cpu;
  struct KernelSet {
    std::string name;
    int score = 0;  ///< 0: cannot run on this CPU
  };
  std::vector<KernelSet> kernel_sets;
  std::string kernels_requested;  ///< kernels.set
  std::string kernels_chosen;     ///< what the run would use; empty when none can
  machine::CoreInfo cores;
  int threads = 0;  ///< what a run of this pipeline starts
  machine::MemoryInfo memory;
  std::uint64_t usable_memory = 0;
  std::string usable_source;  ///< "MemAvailable", "cgroup limit <file>" or "--assume-ram"
  machine::OpenMpWaitPolicy openmp;
  std::string model_path;  ///< model.path as the run reads it
  bool checkpoint_present = false;
  std::vector<std::filesystem::path> shards;
  /// The disk tests, one per distinct expert slot size of the models (the pipeline's first);
  /// empty when the disk was not measured.
  std::vector<machine::DiskBench> disks;
  std::string disk_skipped;  ///< why the disk was not measured
  machine::PageCacheState page_cache;
  std::vector<DoctorModel> models;  ///< the pipeline's model first, then K3
  std::vector<DoctorFinding> findings;

  /// 0 when every finding is ok, the first error's exit code when there is one, else 6
  /// (ExitCode::warnings).
  [[nodiscard]] int exit_code() const;
  /// The preset recommended for the pipeline's model; empty when none fits.
  [[nodiscard]] std::string recommended() const;
  [[nodiscard]] std::string text() const;  ///< for people (doctor_text.cpp)
  [[nodiscard]] std::string json() const;  ///< stable keys (docs/doctor.md)
};

/// Probes, measures and forecasts (see the file comment). Throws UsageError only for
/// options that make no sense (seconds ≤ 0, a presets folder that does not exist); what it
/// finds wrong with the machine or the pipeline are findings.
DoctorReport run_doctor(const Pipeline& pipeline, const DoctorOptions& options);

}  // namespace k3
