// k3host doctor: what this machine can do for K3 with a pipeline (docs/doctor.md): CPU and
// kernel set, cores, memory and cgroup limits, the OpenMP wait policy, the disk under
// model.path and the page cache, the kernel rates, and the preset to use with its forecast
// s/token. The probing is libk3core's (k3/doctor.hpp); this file parses and prints.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include <k3/doctor.hpp>
#include <k3/error.hpp>
#include <k3/log.hpp>
#include <k3/pipeline.hpp>

#include "cli.hpp"

namespace k3::cli {
namespace {

struct DoctorArgs {
  double seconds = 3;
  unsigned io_depth = 8;
  double assume_ram_gb = 0;
  std::string presets_dir;
  std::string output = "text";
  bool no_full_model = false;
};

/// --presets-dir, else the data folder's presets (the ones --config NAME and --list-presets use).
std::filesystem::path presets_folder(const std::string& given) {
  return given.empty() ? default_presets_dir() : std::filesystem::path(given);
}

}  // namespace

Command register_doctor(CLI::App& app, GlobalOptions& global) {
  auto args = std::make_shared<DoctorArgs>();
  auto* sub = app.add_subcommand(
      "doctor",
      "What this machine can do for K3: CPU extensions and kernel set, cores, memory and cgroup limits, the OpenMP "
      "wait policy, the disk under model.path (O_DIRECT reads of one expert's size) and the page cache, and the "
      "largest preset that fits with its forecast s/token, for the pipeline's model and for K3, each measured on its "
      "own shapes (docs/doctor.md)");
  sub->add_option("--seconds", args->seconds,
                  "Seconds of disk reads in all, shared by the models' expert sizes (the pipeline's model, K3), each "
                  "split between depth 1 and --io-depth")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--io-depth", args->io_depth, "Reads in flight in the second disk pass")
      ->capture_default_str()
      ->check(CLI::Range(1u, 256u));
  sub->add_option("--assume-ram", args->assume_ram_gb,
                  "Plan the presets against this much usable memory (GB of 1e9 bytes) instead of measuring it")
      ->check(CLI::PositiveNumber);
  sub->add_option("--presets-dir", args->presets_dir,
                  "Folder of preset files to choose from (default: the presets --config NAME reads)");
  sub->add_option("-o,--output", args->output, "Report format: text or json (stable keys, docs/doctor.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  sub->add_flag("--no-full-model", args->no_full_model,
                "Forecast only the pipeline's model, not also the released K3 (configs/models/k3.yaml)");
  sub->footer(
      "Without --config the default pipeline (configs/default.yaml). Exit codes: 0 every finding ok; 6 warnings but "
      "no error; otherwise the first error's code, the one a run of this pipeline would end with: 2 the pipeline "
      "cannot run (no checkpoint at model.path, a kernel set this CPU cannot run), 3 its memory plan or every "
      "preset's does not fit, 1 a read failed. The report goes to stdout, progress to stderr.");
  return {sub, [args, &global]() {
            const std::filesystem::path file = global.config.empty() ? default_pipeline_file()
                                                                     : std::filesystem::path(global.config);
            const Pipeline p = load_pipeline(file, global.overrides);
            DoctorOptions o;
            o.seconds = args->seconds;
            o.io_depth = args->io_depth;
            if (args->assume_ram_gb > 0) o.assume_ram_gb = args->assume_ram_gb;
            o.presets_dir = presets_folder(args->presets_dir);
            o.full_model = !args->no_full_model;
            o.on_status = [](const std::string& s) { log(LogLevel::info, "doctor", s); };
            const DoctorReport r = run_doctor(p, o);
            std::fputs(args->output == "json" ? r.json().c_str() : r.text().c_str(), stdout);
            std::fflush(stdout);
            return r.exit_code();
          }};
}

}  // namespace k3::cli
