// run_doctor(): probes, measures and forecasts in the order the report prints them
// (docs/doctor.md). Whatever is wrong with the machine or the pipeline becomes a finding
// with a severity; an error finding carries the exit code a run of this pipeline would end
// with (2 for what the run would refuse, 3 for memory, 1 for a failed read).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include <k3/doctor.hpp>
#include <k3/error.hpp>
#include <k3/geometry.hpp>
#include <k3/pipeline.hpp>
#include <k3/pipeline_plugins.hpp>
#include <k3/plan.hpp>
#include <k3/plugin_host.hpp>
#include <k3/runtime.hpp>
#include <k3/units.hpp>

#include "doctor/context.hpp"
#include "doctor/forecast.hpp"
#include "doctor/measure.hpp"
#include "doctor/report_format.hpp"
#include "io/uri.hpp"

namespace k3 {

namespace fs = std::filesystem;

const char* to_string(DoctorSeverity s) noexcept {
  switch (s) {
    case DoctorSeverity::ok: return "ok";
    case DoctorSeverity::warning: return "warning";
    case DoctorSeverity::error: return "error";
  }
  return "?";
}

int DoctorReport::exit_code() const {
  bool warned = false;
  for (const auto& f : findings) {
    if (f.severity == DoctorSeverity::error)
      return f.exit_code != 0 ? f.exit_code : static_cast<int>(ExitCode::runtime);
    warned = warned || f.severity == DoctorSeverity::warning;
  }
  return warned ? static_cast<int>(ExitCode::warnings) : 0;
}

std::string DoctorReport::recommended() const {
  for (const auto& m : models)
    if (m.primary) return m.recommended;
  return {};
}

namespace {

using doctor::Context;
using doctor::ModelToForecast;

int code_of(const Error& e) { return static_cast<int>(e.code()); }

void check_kernels(const Context& c, PluginHost& host, std::shared_ptr<sdk::KernelSet>& kernels) {
  DoctorReport& r = c.r;
  for (const auto& info : host.plugins())
    if (info.kind == PluginKind::kernels) r.kernel_sets.push_back({info.name, info.score});
  std::stable_sort(r.kernel_sets.begin(), r.kernel_sets.end(),
                   [](const DoctorReport::KernelSet& a, const DoctorReport::KernelSet& b) {
    return a.score > b.score;
  });
  // What the pipeline asked for, shown beside what it got (even when that fails).
  r.kernels_requested = c.p.get_string("kernels.set");
  try {
    ModelPlugins made = create_pipeline_plugins(c.p, host, PluginParts::kernels);
    kernels = std::move(made.kernels);
    const std::string& name = made.kernel_name;
    const bool automatic = r.kernels_requested == "auto";
    r.kernels_chosen = name;
    c.add("kernels", DoctorSeverity::ok,
          "kernel set " + name +
              (automatic ? " (kernels.set: auto, the highest score this CPU runs)" : " (kernels.set)"));
  } catch (const Error& e) {
    c.add("kernels", DoctorSeverity::error, e.what(), code_of(e));
  }
}

void check_cores(const Context& c) {
  DoctorReport& r = c.r;
  r.cores = machine::probe_cores();
  const auto setting = c.p.get_int("threads");
  r.threads = setting > 0 ? static_cast<int>(setting) : omp_get_num_procs();
  const auto& k = r.cores;
  if (k.affinity != 0 && k.logical != 0 && k.affinity < k.logical)
    c.add("cores", DoctorSeverity::warning,
          "this process may run on " + std::to_string(k.affinity) + " of the " + std::to_string(k.logical) +
              " online CPUs (affinity mask " + k.affinity_list + ")");
  if (k.cgroup_cpus && static_cast<double>(r.threads) > *k.cgroup_cpus + 1e-9) {
    char quota[32];
    std::snprintf(quota, sizeof quota, "%.2f", *k.cgroup_cpus);
    c.add("cores", DoctorSeverity::warning,
          std::string("the cgroup CPU quota is ") + quota + " CPUs (" + k.cgroup_source + ") but a run starts " +
              std::to_string(r.threads) +
              " threads: they wait for each other at every barrier; set threads: " + std::to_string(k.usable()));
  }
}

void check_memory(const Context& c) {
  DoctorReport& r = c.r;
  r.memory = machine::probe_memory();
  if (c.o.assume_ram_gb) {
    r.usable_memory = static_cast<std::uint64_t>(std::floor(*c.o.assume_ram_gb * 1e9));
    r.usable_source = "--assume-ram";
  } else {
    r.usable_memory = r.memory.usable();
    r.usable_source = r.memory.usable_source();
  }
  if (r.usable_memory == 0)
    c.add("memory", DoctorSeverity::warning, "the usable memory could not be read (proc/meminfo)");
}

void check_openmp(const Context& c) {
  DoctorReport& r = c.r;
  r.openmp = machine::openmp_wait_policy();
  const bool failed = r.openmp.source == machine::OpenMpWaitPolicy::Source::runtime_default &&
                      !r.openmp.reexec_error.empty();
  c.add("openmp", failed ? DoctorSeverity::warning : DoctorSeverity::ok, r.openmp.describe());
}

/// The folder a temporary test file can go in: `dir`, or its nearest existing parent.
fs::path existing_folder(fs::path dir) {
  std::error_code ec;
  while (!dir.empty() && !fs::is_directory(dir, ec)) {
    if (dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  return dir.empty() ? fs::current_path() : dir;
}

/// Where the checkpoint is (model_path, checkpoint_present, shards) and the folder the disk
/// test reads in; empty when nothing can be tested (a URL, or no checkpoint where the run
/// would refuse it: both reported here).
fs::path locate_checkpoint(const Context& c) {
  DoctorReport& r = c.r;
  r.model_path = c.p.get_path("model.path").string();
  if (io::has_uri_scheme(c.p.get_string("model.path"))) {
    r.model_path = c.p.get_string("model.path");
    r.disk_skipped =
        "model.path is a URL: there is no local disk to test (the storage plugin reads it over the network)";
    c.add("disk", DoctorSeverity::warning, r.disk_skipped + "; the forecasts leave out the I/O time");
    return {};
  }
  const fs::path dir = c.p.get_path("model.path");
  std::error_code ec;
  r.checkpoint_present = fs::is_regular_file(dir / "config.json", ec);
  if (r.checkpoint_present) {
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".safetensors" && e.is_regular_file(ec)) r.shards.push_back(e.path());
    std::sort(r.shards.begin(), r.shards.end());
    return dir;
  }
  if (generates_missing_checkpoint(c.p)) {
    const fs::path scratch = existing_folder(dir);
    c.add("disk", DoctorSeverity::ok,
          r.model_path + ": no checkpoint yet; the first run writes the synthetic '" +
              c.p.get_string("model.geometry") + "' checkpoint there (the disk is tested in " + scratch.string() + ")");
    return scratch;
  }
  // What the run would refuse (core/src/job/runtime.cpp), with the same exit code.
  r.disk_skipped = r.model_path + ": no checkpoint there (no config.json; model.path from " + c.p.where("model.path") +
                   "): check the path, or write a synthetic one with `k3host make-model -g <geometry> -o " +
                   r.model_path + "`";
  c.add("disk", DoctorSeverity::error, r.disk_skipped, static_cast<int>(ExitCode::usage));
  return {};
}

/// The pipeline's model (its checkpoint's config.json when it is there, else
/// model.geometry), then the released K3 unless it is the same.
std::vector<ModelToForecast> models_of(const Context& c, PluginHost& host) {
  std::vector<ModelToForecast> out;
  ModelToForecast primary;
  primary.info.primary = true;
  bool have = false;
  if (c.r.checkpoint_present) {
    try {
      const auto storage = create_pipeline_storage(c.p, host);
      primary.config = read_model_config(*storage, c.r.model_path);
      primary.info.name = fs::path(c.r.model_path).filename().string();
      primary.info.source = "checkpoint " + c.r.model_path;
      have = true;
    } catch (const Error& e) {
      c.add("model", DoctorSeverity::error, e.what(), code_of(e));
    }
  }
  if (!have) {
    try {
      const ModelGeometry g = load_geometry(c.p.get_string("model.geometry"));
      primary.config = g.config;
      primary.info.name = g.name;
      primary.info.source = "geometry " + g.file.string();
      have = true;
    } catch (const Error& e) {
      c.add("model", DoctorSeverity::error, e.what(), code_of(e));
    }
  }
  if (have) out.push_back(std::move(primary));
  if (c.o.full_model) {
    try {
      const ModelGeometry g = load_geometry("k3");
      if (out.empty() || g.config.fingerprint() != out.front().config.fingerprint()) {
        ModelToForecast k3;
        k3.config = g.config;
        k3.info.name = g.name;
        k3.info.source = "geometry " + g.file.string();
        out.push_back(std::move(k3));
      }
    } catch (const Error& e) {
      c.add("model", DoctorSeverity::ok, std::string("no forecast for the released K3: ") + e.what());
    }
  }
  return out;
}

struct PresetInputs {
  PresetInfo info;
  PlanInputs inputs;
  bool fixed = true;
};

/// Each preset's memory section with the pipeline's context, prefill chunk and
/// memory.budgets_for (they size the KV cache and the buffers, and say whose bytes the
/// budgets are, which the preset does not choose).
std::vector<PresetInputs> preset_inputs(const Context& c) {
  std::vector<PresetInputs> out;
  const PlanInputs mine = plan_inputs(c.p);
  for (auto& info : list_presets(c.o.presets_dir)) {
    const Pipeline pp = load_pipeline(info.file);
    PresetInputs pi;
    pi.inputs = plan_inputs(pp);
    pi.inputs.context = mine.context;
    pi.inputs.prefill_chunk = mine.prefill_chunk;
    pi.inputs.budgets_for = mine.budgets_for;  // -m demo: the presets are K3's, scaled to the demo
    pi.fixed = pi.inputs.trunk_gb.has_value() && pi.inputs.expert_cache_gb.has_value();
    pi.info = std::move(info);
    out.push_back(std::move(pi));
  }
  return out;
}

DoctorForecast forecast_one(const std::string& name, const fs::path& file, bool fixed, PlanInputs in,
                            const ModelConfig& config, const doctor::Rates& rates, std::uint64_t usable) {
  DoctorForecast f;
  f.name = name;
  f.file = file;
  f.fixed_budgets = fixed;
  in.available = std::max<std::uint64_t>(usable, 1);
  try {
    const MemoryPlan plan = plan_memory(config, in);
    doctor::forecast(f, config, plan, rates, usable);
  } catch (const Error& e) {
    f.error = e.what();
  }
  return f;
}

std::string forecast_text(const DoctorForecast& f) {
  if (f.seconds_per_token > 0)
    return "forecast " + doctor::fixed(f.seconds_per_token, f.seconds_per_token < 1 ? 3 : 2) + " s/token";
  return "no s/token forecast (a rate was not measured)";
}

/// When a "fit" preset (auto) fits too and forecasts faster than `chosen`, say so: it sizes
/// the budgets to this machine, the named presets are fixed.
std::string auto_note(const DoctorModel& m, const DoctorForecast& chosen) {
  for (const auto& f : m.presets)
    if (!f.fixed_budgets && f.fits && f.error.empty() && f.seconds_per_token > 0 && chosen.seconds_per_token > 0 &&
        f.seconds_per_token < chosen.seconds_per_token)
      return "; " + f.name + " sizes its budgets to this memory: plan " + format_bytes(f.total_bytes) + ", " +
             forecast_text(f);
  return {};
}

void forecast_models(const Context& c, std::vector<ModelToForecast>& models) {
  DoctorReport& r = c.r;
  const std::vector<PresetInputs> presets = preset_inputs(c);
  for (auto& m : models) {
    // Each model's forecast from its own measurement (measure.cpp).
    const DoctorMeasurement& mm = m.info.measured;
    const doctor::Rates rates{mm.disk_bytes_per_second, mm.bf16_bytes_per_second, mm.mxfp4_bytes_per_second};
    c.status("planning every preset for " + m.info.name);
    for (const auto& pi : presets)
      m.info.presets.push_back(
          forecast_one(pi.info.name, pi.info.file, pi.fixed, pi.inputs, m.config, rates, r.usable_memory));
    const PlanInputs mine = plan_inputs(c.p);
    m.info.pipeline = forecast_one("pipeline", c.p.file(), mine.trunk_gb && mine.expert_cache_gb, mine, m.config, rates,
                                   r.usable_memory);
    // The largest fixed preset that fits; a "fit" one (auto) only when none does.
    for (const auto& f : m.info.presets)
      if (f.fixed_budgets && f.fits && f.error.empty()) m.info.recommended = f.name;
    if (m.info.recommended.empty())
      for (const auto& f : m.info.presets)
        if (!f.fixed_budgets && f.fits && f.error.empty()) m.info.recommended = f.name;

    const std::string usable = format_bytes(r.usable_memory) + " usable (" + r.usable_source + ")";
    const char* section = "presets";
    if (m.info.recommended.empty()) {
      const std::string smallest = m.info.presets.empty() ? std::string("no presets")
                                                          : m.info.presets.front().name + " needs " +
                                                                format_bytes(m.info.presets.front().total_bytes);
      c.add(section, m.info.primary ? DoctorSeverity::error : DoctorSeverity::ok,
            "no preset fits " + m.info.name + " in " + doctor::fixed(100 * kDoctorMemoryMargin, 0) + "% of " + usable +
                " (" + smallest + ")",
            m.info.primary ? static_cast<int>(ExitCode::resource) : 0);
    } else {
      const auto& f = *std::find_if(m.info.presets.begin(), m.info.presets.end(),
                                    [&](const DoctorForecast& x) { return x.name == m.info.recommended; });
      c.add(section, DoctorSeverity::ok,
            "for " + m.info.name + ": preset " + f.name + " (plan " + format_bytes(f.total_bytes) + " of " + usable +
                "), " + forecast_text(f) + auto_note(m.info, f));
    }
    if (!m.info.primary) continue;
    const DoctorForecast& pf = m.info.pipeline;
    if (!pf.error.empty())
      c.add("pipeline", DoctorSeverity::error, pf.error, static_cast<int>(ExitCode::usage));
    else if (pf.total_bytes > r.usable_memory)
      c.add("pipeline", DoctorSeverity::error,
            "the pipeline's plan needs " + format_bytes(pf.total_bytes) + " but " + usable +
                ": a run exits 3; use a smaller preset" +
                (m.info.recommended.empty() ? std::string() : " (" + m.info.recommended + ")"),
            static_cast<int>(ExitCode::resource));
    else if (!pf.fits)
      c.add("pipeline", DoctorSeverity::warning,
            "the pipeline's plan needs " + format_bytes(pf.total_bytes) + " of " + usable + ": more than " +
                doctor::fixed(100 * kDoctorMemoryMargin, 0) + "%, little is left for the page cache");
    else
      c.add("pipeline", DoctorSeverity::ok,
            "the pipeline's plan needs " + format_bytes(pf.total_bytes) + " of " + usable + ", " + forecast_text(pf));
  }
}

}  // namespace

DoctorReport run_doctor(const Pipeline& p, const DoctorOptions& o) {
  if (!(o.seconds > 0) || !std::isfinite(o.seconds)) throw UsageError("doctor: --seconds must be a positive number");
  if (o.io_depth < 1 || o.io_depth > 256) throw UsageError("doctor: --io-depth must be 1..256");
  if (o.assume_ram_gb && !(*o.assume_ram_gb > 0))
    throw UsageError("doctor: --assume-ram must be a positive number of GB");
  std::error_code ec;
  if (!fs::is_directory(o.presets_dir, ec))
    throw UsageError("doctor: presets folder '" + o.presets_dir.string() + "' does not exist (--presets-dir)");
  DoctorReport r;
  r.pipeline_file = p.file();
  const Context c{p, o, r};

  r.cpu = machine::probe_cpu();
  PluginHost host(p.plugin_path());
  std::shared_ptr<sdk::KernelSet> kernels;
  check_kernels(c, host, kernels);
  check_cores(c);
  check_memory(c);
  check_openmp(c);

  // Each model is measured on its own shapes: the disk in requests of its expert slot, the
  // kernel set on its matrices (measure.cpp).
  const fs::path folder = locate_checkpoint(c);
  std::vector<ModelToForecast> models = models_of(c, host);
  doctor::set_shapes(c, models);
  if (!folder.empty()) doctor::measure_disks(c, folder, models);
  if (kernels) doctor::measure_compute(c, *kernels, models);
  forecast_models(c, models);
  for (auto& m : models) r.models.push_back(std::move(m.info));
  return r;
}

}  // namespace k3
