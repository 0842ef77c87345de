// DoctorReport::text(): the report for people, one section per probe, the preset tables,
// then every finding and the exit code it leads to.
#include <cstdio>

#include <k3/doctor.hpp>
#include <k3/units.hpp>

#include "doctor/report_format.hpp"

namespace k3 {

namespace {

using doctor::fixed;

std::string rate(double bytes_per_second) {
  return bytes_per_second > 0 ? format_bytes(static_cast<std::uint64_t>(bytes_per_second)) + "/s" : "not measured";
}

std::string shape(const DoctorShape& s) { return std::to_string(s.rows) + " x " + std::to_string(s.cols); }

std::string secs(double s) { return s > 0 ? fixed(s, s < 0.1 ? 4 : 3) : "-"; }

void forecast_row(std::string& out, const DoctorForecast& f, bool recommended) {
  char buf[320];
  if (!f.error.empty()) {
    std::snprintf(buf, sizeof buf, "  %-12s cannot be planned: %s\n", f.name.c_str(), f.error.c_str());
    out += buf;
    return;
  }
  std::snprintf(buf, sizeof buf, "  %-12s %10s  %-4s  %10s  %5.1f%%  %9s  %9s  %9s%s\n", f.name.c_str(),
                format_bytes(f.total_bytes).c_str(), f.fits ? "yes" : "no", format_bytes(f.bytes_per_token()).c_str(),
                100.0 * f.expert_hit_rate, secs(f.io_seconds).c_str(), secs(f.compute_seconds).c_str(),
                secs(f.seconds_per_token).c_str(), recommended ? "  <- recommended" : "");
  out += buf;
}

}  // namespace

std::string DoctorReport::text() const {
  std::string out = "k3host doctor: pipeline " + pipeline_file.string() + "\n";

  out += "\nCPU\n  " + cpu.arch + (cpu.model.empty() ? "" : ", " + cpu.model) + "\n  extensions:";
  std::string missing;
  for (const auto& f : cpu.features)
    if (f.present)
      out += " " + f.name;
    else
      missing += " " + f.name;
  out += missing.empty() ? "\n" : "\n  not available:" + missing + "\n";

  out += "\nKernel sets\n ";
  for (const auto& k : kernel_sets)
    out += " " + k.name + " (score " + std::to_string(k.score) + (k.score ? ")" : ", cannot run)");
  out += "\n  kernels.set: " + kernels_requested + " -> " + (kernels_chosen.empty() ? "none usable" : kernels_chosen) +
         "\n";

  out += "\nCores\n  " + std::to_string(cores.logical) + " logical CPUs, " +
         (cores.physical ? std::to_string(cores.physical) + " physical cores" : "physical cores unknown") +
         "; affinity " + std::to_string(cores.affinity) + " CPUs (" + cores.affinity_list + ")";
  out += cores.cgroup_cpus ? "; cgroup quota " + fixed(*cores.cgroup_cpus, 2) + " CPUs (" + cores.cgroup_source + ")"
                           : std::string("; no cgroup CPU quota");
  out += "\n  usable at once: " + std::to_string(cores.usable()) + "; a run starts " + std::to_string(threads) +
         " threads\n";

  out += "\nMemory\n  total " + format_bytes(memory.total) + ", available " + format_bytes(memory.available);
  out += memory.cgroup_limit ? ", cgroup limit " + format_bytes(*memory.cgroup_limit) + " (" +
                                   format_bytes(memory.cgroup_usage) + " used; " + memory.cgroup_source + ")"
                             : std::string(", no cgroup memory limit");
  out += "\n  usable: " + format_bytes(usable_memory) + " (" + usable_source + ")\n";

  out += "\nOpenMP\n  " + openmp.describe() + "\n";

  out += "\nDisk (model.path " + model_path + ")\n";
  for (const auto& d : disks) {
    std::string who;  // the models read in this request size
    for (const auto& m : models)
      if (m.measured.disk_request_bytes == d.request_bytes) who += (who.empty() ? "" : " and ") + m.name;
    out += "  " +
           (d.temporary_file ? std::string("a temporary file") : std::to_string(shards.size()) + " shard files") +
           " in " + d.folder.string() + " on " + d.filesystem + ", " + (d.o_direct ? "O_DIRECT" : "buffered") +
           " random reads of " + format_bytes(d.request_bytes) + (who.empty() ? "" : " (one expert of " + who + ")") +
           " over " + format_bytes(d.span_bytes) + "\n";
    if (!d.note.empty()) out += "  " + d.note + "\n";
    for (const auto& p : d.passes) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "  depth %-3u %12s  (%llu reads in %.2f s, %.3f ms each)\n", p.depth,
                    rate(p.bytes_per_second()).c_str(), static_cast<unsigned long long>(p.requests), p.seconds,
                    p.requests ? 1e3 * p.seconds * p.depth / static_cast<double>(p.requests) : 0.0);
      out += buf;
    }
  }
  if (disks.empty()) out += "  not measured: " + disk_skipped + "\n";
  if (page_cache.files != 0)
    out += "  page cache: " + format_bytes(page_cache.resident) + " of " + format_bytes(page_cache.bytes) +
           " resident (" +
           fixed(page_cache.bytes
                     ? 100.0 * static_cast<double>(page_cache.resident) / static_cast<double>(page_cache.bytes)
                     : 0,
                 1) +
           "%)\n";

  out += "\nCompute\n  " + (kernels_chosen.empty() ? std::string("no kernel set") : kernels_chosen) + " on " +
         std::to_string(threads) + " threads, weights multiplied per second, on each model's shapes\n";
  for (const auto& m : models) {
    const DoctorKernelShapes& s = m.measured.shapes;
    std::string experts;
    for (const auto& e : s.expert) experts += (experts.empty() ? "" : ", ") + shape(e);
    out += "  " + m.name + ": BF16 " + rate(m.measured.bf16_bytes_per_second) + " (" + shape(s.bf16) +
           (s.bf16.rows < s.bf16_rows_of_model ? " of " + std::to_string(s.bf16_rows_of_model) + " rows" : "") +
           "), MXFP4 " + rate(m.measured.mxfp4_bytes_per_second) + " (experts of " + experts + ")\n";
  }

  for (const auto& m : models) {
    out += "\nPresets for " + m.name + " (" + m.source + "); fits = plan <= " + fixed(100 * kDoctorMemoryMargin, 0) +
           "% of " + format_bytes(usable_memory) + "\n  rates: disk " + rate(m.measured.disk_bytes_per_second) +
           (m.measured.disk_request_bytes ? " (" + format_bytes(m.measured.disk_request_bytes) + " reads)"
                                          : std::string()) +
           ", BF16 " + rate(m.measured.bf16_bytes_per_second) + ", MXFP4 " + rate(m.measured.mxfp4_bytes_per_second) +
           "\n";
    char head[240];
    std::snprintf(head, sizeof head, "  %-12s %10s  %-4s  %10s  %6s  %9s  %9s  %9s\n", "preset", "plan", "fits",
                  "read/token", "hits", "I/O s", "compute s", "s/token");
    out += head;
    for (const auto& f : m.presets) forecast_row(out, f, f.name == m.recommended);
    forecast_row(out, m.pipeline, false);
    out += "  recommended: " + (m.recommended.empty() ? std::string("none fits") : m.recommended) + "\n";
  }

  out += "\nFindings\n";
  int warnings = 0, errors = 0;
  for (const auto& f : findings) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "  %-8s %-10s ", to_string(f.severity), f.section.c_str());
    out += buf + f.message + "\n";
    warnings += f.severity == DoctorSeverity::warning ? 1 : 0;
    errors += f.severity == DoctorSeverity::error ? 1 : 0;
  }
  out += "\n" + std::to_string(errors) + " error(s), " + std::to_string(warnings) + " warning(s): exit " +
         std::to_string(exit_code()) + "\n";
  return out;
}

}  // namespace k3
