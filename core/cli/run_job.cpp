#include "run_job.hpp"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <k3/build_info.hpp>
#include <k3/draft_model.hpp>
#include <k3/error.hpp>
#include <k3/job.hpp>
#include <k3/log.hpp>
#include <k3/pipeline.hpp>
#include <k3/units.hpp>

#include "stop_signal.hpp"

namespace k3::cli {

void add_run_options(CLI::App& app, RunOptions& run) {
  app.add_flag("--print-config", run.print_config, "Print the merged pipeline (after extends and --set) and exit");
  app.add_flag("--list-presets", run.list_presets, "List the memory presets (from the preset files) and exit");
  app.add_option("--presets-dir", run.presets_dir,
                 "Folder of preset files for --list-presets (default: the presets --config NAME finds)");
  app.add_flag("--print-schema", run.print_schema,
               "Print every pipeline key with its type, default and meaning (Markdown) and exit");
  app.add_flag("--version", run.version,
               "Print the version, the commit it was built from, the compiler and the kernel sets this CPU runs");
  app.footer(
      "Ctrl-C (or SIGTERM) stops a run at the next token: the trace, the state (--save-state) and the "
      "report (--out) are still written, then exit code 5; --load-state continues it exactly. A storage "
      "wait (a stalled server) is cut short instead: the report is written, the state is not. A second "
      "Ctrl-C exits at once, leaving no temporary file. A run that fails (exit 1, 4) writes the report "
      "with the reason too. Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error, 3 the "
      "plan does not fit, 4 a routed expert failed to load, 5 interrupted.");
}


namespace {

/// --presets-dir, else the folder a preset name resolves in (k3/data_dir.hpp).
std::filesystem::path presets_dir(const RunOptions& run) {
  return run.presets_dir.empty() ? default_presets_dir() : std::filesystem::path(run.presets_dir);
}

/// Per step (with -v: one line per token is too many by default; the report has them all):
/// time, bytes read, true resident hit rate. Then the whole-run I/O summary.
void print_io_report(const JobReport& r) {
  const bool per_step = log_enabled(LogLevel::debug);
  for (std::size_t i = 0; per_step && i < r.result.steps.size() && i < r.step_io.size(); ++i) {
    const auto& io = r.step_io[i];
    if (!r.result.steps[i].forward) {
      std::printf("step %3zu  %8.3f s  last token: sampled from step %zu's logits, no forward pass\n", i,
                  r.result.steps[i].seconds, i == 0 ? 0 : i - 1);
      continue;
    }
    if (!r.streaming) {  // resident: nothing is read per step, there is no cache to hit
      std::printf("step %3zu  %8.3f s\n", i, r.result.steps[i].seconds);
      continue;
    }
    std::printf("step %3zu  %8.3f s  experts %s  trunk %s  tables %s  hit %5.1f%% (%llu/%llu)  io wait %.3f s\n", i,
                r.result.steps[i].seconds, format_bytes(io.expert_bytes).c_str(), format_bytes(io.trunk_bytes).c_str(),
                format_bytes(io.table_bytes).c_str(), 100.0 * io.hit_rate(),
                static_cast<unsigned long long>(io.expert_hits), static_cast<unsigned long long>(io.expert_requests),
                io.io_wait_seconds);
  }
  if (!r.streaming) {
    std::printf("resident: every weight read once at load (%s) | %.3f s/token | peak RSS %s (plan %s)\n",
                format_bytes(r.io.trunk_bytes).c_str(), r.seconds_per_token, format_bytes(r.peak_rss).c_str(),
                format_bytes(r.plan.total).c_str());
    return;
  }
  std::printf(
      "read: trunk %s, experts %s, embedding/head %s | true hit rate %.1f%% | I/O share of wall clock "
      "%.1f%% | %.3f s/token | peak RSS %s (plan %s)\n",
      format_bytes(r.io.trunk_bytes).c_str(), format_bytes(r.io.expert_bytes).c_str(),
      format_bytes(r.io.table_bytes).c_str(),
      r.io.expert_requests ? 100.0 * static_cast<double>(r.io.expert_hits) / static_cast<double>(r.io.expert_requests)
                           : 0.0,
      100.0 * r.io_share, r.seconds_per_token, format_bytes(r.peak_rss).c_str(), format_bytes(r.plan.total).c_str());
  if (r.prefetch_depth > 0) {
    const auto pct = [](std::uint64_t a, std::uint64_t b) {
      return b ? 100.0 * static_cast<double>(a) / static_cast<double>(b) : 0.0;
    };
    std::printf(
        "prefetch (depth %zu): %llu experts read ahead (%s), %llu used, %s wasted | prefetch hits %llu "
        "(%.1f%% of requests) | predictor recall %.1f%%, precision %.1f%%\n",
        r.prefetch_depth, static_cast<unsigned long long>(r.io.prefetch_experts),
        format_bytes(r.io.prefetch_bytes).c_str(), static_cast<unsigned long long>(r.io.prefetch_used),
        format_bytes(r.io.prefetch_wasted_bytes).c_str(), static_cast<unsigned long long>(r.io.prefetch_hits),
        pct(r.io.prefetch_hits, r.io.expert_requests), pct(r.io.lookahead_correct, r.io.lookahead_routed),
        pct(r.io.lookahead_correct, r.io.lookahead_predicted));
  }
}

/// A piece of the job's text on stdout, flushed at once; the logger learns whether it left
/// the line open (set_stdout_line_open), so that a log line never continues it. The line is
/// marked open before the write: a log line in between then ends an empty line, never
/// the text's.
void write_text(const std::string& text) {
  if (text.empty()) return;
  set_stdout_line_open(true);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  set_stdout_line_open(text.back() != '\n');
}

/// Why generation ended, as the summary says it ("" for the token limit: that is what -n asked).
std::string stop_note(const JobReport& r) {
  switch (r.result.stop_reason) {
    case StopReason::length: return "";
    case StopReason::eos: return " (stopped at EOS)";
    case StopReason::interrupted: return " (interrupted)";
    case StopReason::context_full: return " (stopped: context full, " + std::to_string(r.context) + " tokens)";
  }
  return "";
}

/// --version: what was built, from which commit, and which kernel sets this CPU can run.
int print_version() {
  const BuildInfo& b = build_info();
  std::printf("k3host %s\ncommit %s\ncompiler %s, %s build\n", b.version.c_str(), b.commit.c_str(), b.compiler.c_str(),
              b.build_type.c_str());
  const PluginHost host;
  std::string runs;
  for (const auto& p : host.plugins())
    if (p.kind == PluginKind::kernels && p.score > 0) runs += (runs.empty() ? "" : ", ") + p.name;
  if (runs.empty()) {
    std::printf("kernel sets this CPU runs: none found in %s\n",
                host.search_path().empty() ? "(no plugin folder)" : host.search_path().front().c_str());
    return static_cast<int>(ExitCode::runtime);
  }
  std::printf("kernel sets this CPU runs: %s (chosen by default: %s)\n", runs.c_str(),
              host.best_kernels().name.c_str());
  return 0;
}

}  // namespace

/// Runs the job, streaming the generated text to stdout and the log (status, plan) to stderr.
/// `quiet` (-q) also leaves out stdout's prompt echo and summary: only the generated text.
/// Ctrl-C or SIGTERM stops generation at the next token (or prefill chunk), or cuts a storage
/// wait short; the job still writes the trace, the state (not after a cut) and the report,
/// the summary is printed, and the exit code is 5. A second signal exits at once
/// (StopSignal), leaving no temporary file. A run that fails part way (exit 1) has its
/// report written too, with the reason; the error line says where.
int run_pipeline(const Pipeline& pipeline, bool quiet, Cluster* cluster) {
  const StopSignal stop;
  JobHooks hooks;
  hooks.stop = &stop.flag();
  hooks.cluster = cluster;
  const ClusterStopScope cluster_stop(cluster, &stop.flag());
  std::filesystem::path report_written;
  hooks.on_report = [&](const std::filesystem::path& file) { report_written = file; };
  hooks.on_status = [&](const std::string& s) { log(LogLevel::info, "", s); };
  hooks.on_progress = show_load_progress;
  hooks.on_plan = [&](const std::string& table) { log_text(LogLevel::info, table); };
  hooks.on_prompt = [&](const std::string& text, const std::vector<std::uint32_t>& ids) {
    if (quiet) return;
    if (ids.empty())
      std::printf("prompt: none, continuing the loaded conversation\n");
    else
      std::printf("prompt (%zu tokens): %s\n", ids.size(), text.c_str());
    write_text("output: ");
  };
  hooks.on_token = [&](std::uint32_t, const std::string& text) { write_text(text); };
  JobReport r;
  try {
    r = run_job(pipeline, hooks);
  } catch (const Error& e) {
    if (report_written.empty()) throw;
    if (!stdout_line_ended_by_log()) std::printf("\n");
    set_stdout_line_open(false);
    std::fflush(stdout);
    log(LogLevel::error, "", e.what());
    const char* by = stop.signal_number() == SIGTERM ? "SIGTERM" : "Ctrl-C";
    log(LogLevel::error, "",
        (e.code() == ExitCode::interrupted ? std::string("interrupted by ") + by + "; " : std::string()) +
            "the report of the failed run: " + report_written.string());
    return static_cast<int>(e.code());
  }
  // The text's last line ends here, unless a log line on the same terminal ended it already.
  if (!stdout_line_ended_by_log()) std::printf("\n");
  set_stdout_line_open(false);
  if (!quiet) {
    std::printf(
        "generated %zu tokens%s | prefill %.3f s | decode %.2f tokens/s | peak RSS %s | kernels %s, %d threads\n",
        r.result.generated.size(), stop_note(r).c_str(), r.result.prefill_seconds, r.tokens_per_second,
        format_bytes(r.peak_rss).c_str(), r.kernels.c_str(), r.threads);
    print_io_report(r);
    if (const SpeculativeStats& sp = r.result.speculative; sp.verify_passes > 0)
      std::printf(
          "speculative: %zu tokens fed back in %llu forward passes (%.2f per pass) | drafts accepted "
          "%llu of %llu (%.1f%%)%s\n",
          r.decode_forwards, static_cast<unsigned long long>(sp.passes()),
          static_cast<double>(r.decode_forwards) / static_cast<double>(sp.passes()),
          static_cast<unsigned long long>(sp.drafts_accepted), static_cast<unsigned long long>(sp.drafts_proposed),
          sp.drafts_proposed ? 100.0 * static_cast<double>(sp.drafts_accepted) / static_cast<double>(sp.drafts_proposed)
                             : 0.0,
          r.speculative.model ? (" | drafted by " + r.speculative.model->model().uri()).c_str() : "");
    if (!r.report_file.empty()) std::printf("report: %s\n", r.report_file.c_str());
  }
  std::fflush(stdout);
  // An unsound run (exit 4) says so even when it was also interrupted: that matters more.
  if (r.result.interrupted && r.expert_failures.empty()) {
    std::string saved;
    if (!r.state_file.empty()) saved += "; state saved to " + r.state_file.string() + " (--load-state continues it)";
    if (!r.report_file.empty()) saved += "; report " + r.report_file.string();
    if (!r.trace_file.empty()) saved += "; trace " + r.trace_file.string();
    const char* by = stop.signal_number() == SIGTERM ? "SIGTERM" : "Ctrl-C";
    if (!r.result.cut.empty())  // the stop cut a storage wait short: the state is not the conversation's
      saved = "; it cut a storage wait short (" + r.result.cut + "), so no state was saved" + saved;
    log(LogLevel::warn, "",
        std::string("interrupted by ") + by + " after " + std::to_string(r.result.generated.size()) +
            " generated tokens" + saved);
    return static_cast<int>(ExitCode::interrupted);
  }
  if (!r.expert_failures.empty()) {
    for (const auto& f : r.expert_failures) log(LogLevel::error, "", "routed expert failed: " + f);
    log(LogLevel::error, "",
        std::to_string(r.expert_failures.size()) +
            " routed expert read(s) failed; their contributions were zero, so the generated ids are unsound");
    return static_cast<int>(ExitCode::expert_failure);
  }
  return 0;
}

void show_load_progress(const std::string& what, std::uint64_t done, std::uint64_t total) {
  // A terminal redraw, not a log line: shown when info lines are, never in the log file.
  if (!log_enabled(LogLevel::info) || total == 0) return;
  done = std::min(done, total);
  std::fprintf(stderr, "\r[k3host] info: %s: %5.1f%% (%s of %s)%s", what.c_str(),
               100.0 * static_cast<double>(done) / static_cast<double>(total), format_bytes(done).c_str(),
               format_bytes(total).c_str(), done >= total ? "\n" : "");
}

int run_job(const GlobalOptions& global, const RunOptions& run) {
  if (run.version) return print_version();
  if (run.print_schema) {
    std::fputs(pipeline_schema_markdown().c_str(), stdout);
    return 0;
  }
  if (run.list_presets) {
    std::printf("%-12s %-9s %-9s %s\n", "PRESET", "TRUNK_GB", "CACHE_GB", "DESCRIPTION");
    for (const auto& p : list_presets(presets_dir(run)))
      std::printf("%-12s %-9s %-9s %s\n", p.name.c_str(), p.trunk_gb.c_str(), p.expert_cache_gb.c_str(),
                  p.description.c_str());
    return 0;
  }
  if (global.config.empty())
    throw UsageError("no pipeline given: use --config PRESET or --config FILE (e.g. --config laptop)");
  const Pipeline pipeline = load_pipeline(global.config, global.overrides);
  if (run.print_config) {
    std::fputs(pipeline.dump().c_str(), stdout);
    return 0;
  }
  if (pipeline.get_string("cluster.transport") != "none") return run_cluster(pipeline, global.log.quiet);
  if (!pipeline.get_path("job.prompts").empty()) return run_prompts_file(pipeline);
  return run_pipeline(pipeline, global.log.quiet);
}

}  // namespace k3::cli
