// k3host bench: the main job's speed as a user sees it, repeated and averaged, for one
// pipeline or several compared in one run (docs/benchmarks.md "k3host bench").
//
//   k3host bench --config presets/laptop.yaml [--config presets/ultra.yaml]... [-r 3] [--warmup N]
//                [-n N] [--prompt TEXT | --ids 1,2,3] [--parallel 1,2,4] [-o table|csv|json] [--reload]
//                [--set k=v]...
//
// The measuring is libk3core's (k3/bench.hpp: each pipeline in a worker process of its
// own, loaded once, warmed up, then its repetitions interleaved with the others'); this
// file parses, shows the progress on stderr and prints the result on stdout.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <k3/bench.hpp>
#include <k3/error.hpp>
#include <k3/log.hpp>
#include <k3/pipeline.hpp>

#include "cli.hpp"
#include "stop_signal.hpp"

namespace k3::cli {
namespace {

struct BenchArgs {
  std::vector<std::string> configs;
  int repetitions = 3;
  std::int64_t warmup = -1;     ///< < 0: as many tokens as a repetition
  std::int64_t new_tokens = 0;  ///< 0: the pipeline's job.max_new_tokens
  std::string prompt;
  std::string ids;
  std::string output = "table";
  std::string parallel;  ///< "1,2,4,8": streams per repetition, one pipeline each
  bool reload = false;
  CLI::Option* prompt_option = nullptr;
  CLI::Option* tokens_option = nullptr;
  CLI::Option* warmup_option = nullptr;
};

std::vector<std::string> split_ids(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    out.push_back(item);
  }
  return out;
}

/// The progress redraw on stderr ("[bench] info: run 3/6: B repetition 2/3: token 5/16"),
/// shown when info lines are (-q hides it), never in the log file. Called in the worker
/// processes, one at a time.
void show_bench_progress(const std::string& what, std::size_t done, std::size_t total) {
  if (!log_enabled(LogLevel::info)) return;
  static std::size_t shown = 0;  // length of the line being redrawn, to blank what is left of it
  std::string line =
      "[bench] info: " + what + ": " +
      (done == 0 ? std::string("prefill") : "token " + std::to_string(done) + "/" + std::to_string(total));
  const std::size_t length = line.size();
  if (length < shown) line.append(shown - length, ' ');
  const bool last = done >= total;
  std::fprintf(stderr, "\r%s%s", line.c_str(), last ? "\n" : "");
  std::fflush(stderr);
  shown = last ? 0 : length;
}

BenchRequest request_of(const GlobalOptions& global, const BenchArgs& a) {
  if (a.repetitions < 1)
    throw UsageError("bench: -r/--repetitions must be at least 1 (got " + std::to_string(a.repetitions) + ")");
  if (a.output != "table" && a.output != "csv" && a.output != "json")
    throw UsageError("bench: -o/--output: '" + a.output + "' is not an output format (table, csv or json)");
  if (a.tokens_option->count() > 0 && a.new_tokens < 2)
    throw UsageError("bench: -n must be at least 2 (got " + std::to_string(a.new_tokens) +
                     "): a repetition needs a decode forward pass to time");
  if (a.warmup_option->count() > 0 && a.warmup < 0)
    throw UsageError("bench: --warmup must be 0 or more tokens (got " + std::to_string(a.warmup) + ")");
  if (a.prompt_option->count() > 0 && !a.ids.empty())
    throw UsageError("bench: --prompt and --ids both given: the prompt is one or the other");
  BenchRequest r;
  r.repetitions = a.repetitions;
  r.reload = a.reload;
  r.settings.new_tokens = a.new_tokens;
  r.settings.warmup_tokens = a.warmup;
  if (!a.ids.empty()) r.settings.prompt_ids = split_ids(a.ids);
  if (a.prompt_option->count() > 0) r.settings.prompt_text = a.prompt;
  // The global --config before `bench` counts as the first pipeline.
  std::vector<std::string> configs;
  if (!global.config.empty()) configs.push_back(global.config);
  configs.insert(configs.end(), a.configs.begin(), a.configs.end());
  if (configs.empty())
    throw UsageError(
        "bench: no pipeline given: use --config FILE, once per pipeline to compare "
        "(e.g. --config presets/laptop.yaml --config presets/ultra.yaml)");
  // --parallel 1,2,4: each pipeline once per stream count, its plan holding that many.
  std::vector<std::size_t> streams;
  for (const std::string& item : split_ids(a.parallel)) {
    std::size_t used = 0;
    long long n = 0;
    try {
      n = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    if (used != item.size() || n < 1 || n > 64)
      throw UsageError("bench: --parallel: '" + item + "' is not a number of streams from 1 to 64");
    streams.push_back(static_cast<std::size_t>(n));
  }
  if (streams.empty()) streams.push_back(1);
  if (configs.size() * streams.size() > 26)
    throw UsageError("bench: " + std::to_string(configs.size() * streams.size()) +
                     " pipelines (--config × --parallel); at most 26 (A … Z) in one bench");
  for (const std::string& c : configs)
    for (const std::size_t n : streams) {
      if (a.parallel.empty()) {
        r.pipelines.push_back({c, load_pipeline(c, global.overrides), 1});
        continue;
      }
      std::vector<Override> overrides = global.overrides;
      overrides.push_back({"serve.parallel=" + std::to_string(n), "--parallel " + a.parallel});
      r.pipelines.push_back({c + " --parallel " + std::to_string(n), load_pipeline(c, overrides), n});
    }
  return r;
}

/// Prints the result, then says what went wrong in it; returns the exit code.
int report(const BenchResult& result, const std::string& output, const StopSignal& stop) {
  const std::string text = output == "json"  ? bench_json(result)
                           : output == "csv" ? bench_csv(result)
                                             : bench_table(result);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  // A run that lost a routed expert is unsound (exit 4) whatever else happened.
  std::size_t failures = 0;
  for (const auto& p : result.pipelines) {
    for (const auto& f : p.info.warmup_expert_failures) {
      log(LogLevel::error, "", p.label + " (warm-up): routed expert failed: " + f);
      ++failures;
    }
    for (const auto& s : p.samples)
      for (const auto& f : s.expert_failures) {
        log(LogLevel::error, "", p.label + ": routed expert failed: " + f);
        ++failures;
      }
  }
  if (failures > 0) {
    log(LogLevel::error, "",
        std::to_string(failures) +
            " routed expert read(s) failed; their contributions were zero, so the generated "
            "ids and the timings are not the model's");
    return static_cast<int>(ExitCode::expert_failure);
  }
  for (const auto& p : result.pipelines)
    for (const auto& s : p.samples)
      if (s.generated != p.samples.front().generated) {
        log(LogLevel::error, "",
            "pipeline " + p.label + " (" + p.config +
                ") generated different ids in different repetitions of the same prompt: the exactness contract "
                "is broken (docs/architecture.md)");
        return static_cast<int>(ExitCode::runtime);
      }
  if (result.interrupted) {
    std::size_t done = result.order.size(),
                asked = result.pipelines.size() * static_cast<std::size_t>(result.repetitions);
    log(LogLevel::warn, "",
        std::string("interrupted by ") + (stop.signal_number() == SIGTERM ? "SIGTERM" : "Ctrl-C") + " after " +
            std::to_string(done) + " of " + std::to_string(asked) + " runs; the run it cut short is left out");
    return static_cast<int>(ExitCode::interrupted);
  }
  return 0;
}

}  // namespace

Command register_bench(CLI::App& app, GlobalOptions& global) {
  auto a = std::make_shared<BenchArgs>();
  auto* sub = app.add_subcommand(
      "bench",
      "Measure the main job's speed: prefill and decode tokens/s, s/token, expert-cache hit rate, bytes read per "
      "token and peak RSS, as mean ± sd over repetitions; several --config are compared (B/A) in one interleaved run");
  sub->add_option("--config", a->configs,
                  "Pipeline YAML file to bench (repeatable: A, B, ...; a --config given before `bench` is the first)")
      ->type_name("FILE");
  sub->add_option("-r,--repetitions", a->repetitions, "Timed repetitions per pipeline (default 3)")->type_name("N");
  a->warmup_option = sub->add_option("--warmup", a->warmup,
                                     "Tokens generated by an untimed run of the prompt before the first repetition, to "
                                     "fill the expert cache (default: as many as -n; 0: none, the first repetition "
                                     "starts cold)")
                         ->type_name("N");
  a->tokens_option =
      sub->add_option("-n,--new-tokens", a->new_tokens,
                      "Tokens generated per repetition, at least 2 (default: the pipeline's job.max_new_tokens); EOS "
                      "does not stop a repetition")
          ->type_name("N");
  a->prompt_option =
      sub->add_option("--prompt", a->prompt, "Prompt text (default: the pipeline's job prompt)")->type_name("TEXT");
  sub->add_option("--ids", a->ids, "Prompt as token ids, comma-separated (default: the pipeline's job prompt)")
      ->type_name("LIST");
  sub->add_option("-o,--output", a->output, "Output on stdout: table (default), csv or json")->type_name("FORMAT");
  sub->add_option("--parallel", a->parallel,
                  "Streams decoded together, comma-separated (e.g. 1,2,4,8): each pipeline is benched once per "
                  "count, its prompt generated that many times at once (stream i with seed + i) through the step "
                  "scheduler; decode figures are the streams' together (tokens/s in all, bytes read per token)")
      ->type_name("LIST");
  sub->add_flag("--reload", a->reload,
                "Load every repetition afresh (a new process, its own warm-up), so that only one pipeline is in "
                "memory at a time; for budgets that do not fit side by side");
  sub->footer(
      "Each pipeline runs in a worker process of its own, loaded once and kept: all of them are in memory at once "
      "(--reload: one at a time). Its warm-up run fills the expert cache; then the repetitions run A1 B1 A2 B2 ..., "
      "one at a time. Every repetition starts from an empty conversation: the KV cache, the KDA state and the "
      "position are reset. Kept between repetitions: the loaded model, its expert cache and trunk ring as the "
      "previous runs left them, and the page cache. Decode metrics (tokens/s, s/token, hit rate, bytes read per "
      "token) count the decode forward passes only (N tokens: N-1), prefill tokens/s the prompt's. Peak RSS is the "
      "pipeline's own process, so far (getrusage). --set applies to every pipeline. The job's files (job.report, "
      "trace.out, job.save_state, job.dump_logits) are not written; job.load_state and cache.future are refused. "
      "Progress goes to stderr (-q hides it), the result to stdout. Ctrl-C stops at the next token and prints the "
      "repetitions done (exit 5). Exit codes: 0 ok, 1 runtime failure or different ids in two repetitions, 2 usage "
      "or configuration error, 3 a plan does not fit, 4 a routed expert failed to load, 5 interrupted.");
  return {sub, [a, &global]() {
            BenchRequest request = request_of(global, *a);
            const StopSignal stop;
            LoadHooks hooks;
            hooks.stop = &stop.flag();
            hooks.on_status = [](const std::string& s) { log(LogLevel::info, "", s); };
            hooks.on_progress = show_load_progress;
            hooks.on_plan = [](const std::string& table) { log_text(LogLevel::debug, table); };
            const BenchResult result = run_bench(request, hooks, show_bench_progress);
            return report(result, a->output, stop);
          }};
}

}  // namespace k3::cli
