// `k3host --prompts FILE`: the prompts of a file generated together (k3/prompts.hpp). Each
// result is one JSON line on stdout, in input order, as soon as its prompt and the ones
// before it are done (or, with --results FILE, the file written whole at the end); the
// summary goes to the log. Ctrl-C stops every prompt at its next token: the results so far
// are written, then exit 5.
#include <cstdio>

#include <k3/error.hpp>
#include <k3/log.hpp>
#include <k3/prompts.hpp>
#include <k3/units.hpp>

#include "run_job.hpp"
#include "stop_signal.hpp"

namespace k3::cli {

int run_prompts_file(const Pipeline& pipeline) {
  const StopSignal stop;
  PromptsHooks hooks;
  hooks.stop = &stop.flag();
  hooks.on_status = [](const std::string& s) { log(LogLevel::info, "", s); };
  hooks.on_progress = show_load_progress;
  hooks.on_plan = [](const std::string& table) { log_text(LogLevel::info, table); };
  const bool to_stdout = pipeline.get_path("job.results").empty();
  hooks.on_result = [&](const PromptResult&, const std::string& line) {
    if (!to_stdout) return;
    std::fputs((line + "\n").c_str(), stdout);
    std::fflush(stdout);
  };
  PluginHost host(pipeline.plugin_path());
  const PromptsReport r = run_prompts(pipeline, host, hooks);
  char line[512];
  std::snprintf(line, sizeof line,
                "%zu prompts, %llu tokens generated in %.2f s: %.2f tokens/s in all, %s read per token | %zu sequences "
                "at once, %.2f per step on average | time to first token p50 %.3f s, p99 %.3f s | between tokens "
                "p50 %.4f s, p99 %.4f s | queue wait p50 %.3f s",
                r.prompts.size(), static_cast<unsigned long long>(r.generated), r.batch_seconds, r.tokens_per_second(),
                format_bytes(static_cast<std::uint64_t>(r.bytes_per_token())).c_str(), r.parallel,
                r.steps ? static_cast<double>(r.step_sequences) / static_cast<double>(r.steps) : 0.0, r.first_token.p50,
                r.first_token.p99, r.token_gap.p50, r.token_gap.p99, r.queue_wait.p50);
  log(LogLevel::info, "", line);
  if (!r.results_file.empty()) log(LogLevel::info, "", "results: " + r.results_file.string());
  if (!r.report_file.empty()) log(LogLevel::info, "", "report: " + r.report_file.string());
  if (!r.failure.empty()) log(LogLevel::error, "", r.failure);
  for (const auto& f : r.expert_failures) log(LogLevel::error, "", "routed expert failed: " + f);
  if (r.exit_code == static_cast<int>(ExitCode::interrupted))
    log(LogLevel::warn, "", "interrupted: the prompts not finished say \"interrupted\"");
  return r.exit_code;
}

}  // namespace k3::cli
