// k3host perplexity: how well the pipeline's model predicts a text file (k3/perplexity.hpp;
// docs/demo-model.md, "Perplexity").
//
//   k3host perplexity FILE [--config PIPELINE] [--window 256] [--stride 128] [--json]
//
// The file's bytes are tokenized as plain text (special-token text stays text), BOS is put
// in front once, and the ids are scored in sliding windows, each prefilled in chunks of
// job.prefill_chunk. The result is exact: the same bits at every kernel set, thread count
// and memory budget. A progress line runs on stderr; Ctrl-C stops after the current chunk
// and prints the perplexity of what was scored, marked interrupted, with exit code 5.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <k3/error.hpp>
#include <k3/log.hpp>
#include <k3/perplexity.hpp>
#include <k3/pipeline.hpp>
#include <k3/plugin_host.hpp>
#include <k3/runtime.hpp>
#include <k3/user_files.hpp>

#include "cli.hpp"
#include "stop_signal.hpp"

namespace k3::cli {
namespace {

struct PerplexityOptions {
  std::string file;
  std::int64_t window = 256;
  std::int64_t stride = 0;
  bool json = false;
};

/// The progress redraw on stderr, as the load progress does it (only when info lines show),
/// at most five times a second: a long text is thousands of chunks.
void show_scoring_progress(std::int64_t scored, std::int64_t total) {
  if (!log_enabled(LogLevel::info) || total <= 0) return;
  static auto last = std::chrono::steady_clock::time_point{};
  const auto now = std::chrono::steady_clock::now();
  if (scored < total && now - last < std::chrono::milliseconds(200)) return;
  last = now;
  std::fprintf(stderr, "\r[perplexity] info: %5.1f%% (%lld of %lld tokens)%s",
               100.0 * static_cast<double>(scored) / static_cast<double>(total), static_cast<long long>(scored),
               static_cast<long long>(total), scored >= total ? "\n" : "");
}

int run_perplexity(const GlobalOptions& global, const PerplexityOptions& opt) {
  const Pipeline pipeline =
      load_pipeline(global.config.empty() ? default_pipeline_file() : std::filesystem::path(global.config),
                    global.overrides);
  // Checked before the model loads, so a mistake costs nothing.
  const std::string text = read_text_file(opt.file, "perplexity", kMaxTextFileBytes);
  PerplexitySettings settings;
  settings.window = opt.window;
  settings.stride = opt.stride;
  settings.chunk = pipeline.get_int("job.prefill_chunk");
  (void)checked_stride(settings);

  PluginHost host(pipeline.plugin_path());
  LoadHooks hooks;
  hooks.on_status = [](const std::string& s) { log(LogLevel::info, "", s); };
  hooks.on_progress = show_load_progress;
  hooks.on_plan = [](const std::string& table) { log_text(LogLevel::debug, table); };
  Runtime runtime(pipeline, host, hooks);

  std::vector<std::uint32_t> ids{static_cast<std::uint32_t>(runtime.model().config().bos_token_id)};
  std::vector<std::uint32_t> text_ids;
  try {
    text_ids = runtime.encode(text);
  } catch (const UsageError& e) {
    throw UsageError("perplexity: " + opt.file + ": " + e.what());  // not text: say which file
  }
  ids.insert(ids.end(), text_ids.begin(), text_ids.end());

  const StopSignal stop;
  settings.stop = &stop.flag();
  settings.on_progress = show_scoring_progress;
  const PerplexityResult r = perplexity(runtime.model(), ids, settings);
  if (r.interrupted && log_enabled(LogLevel::info)) std::fputc('\n', stderr);  // end the progress line

  if (opt.json) {
    std::fputs(perplexity_json(r,
                               {opt.file, runtime.model_uri(), runtime.model().kernel_set(), runtime.model().threads()})
                   .c_str(),
               stdout);
  } else {
    std::printf("perplexity %.9g over %lld tokens of %s (mean NLL %.9g nats, %.4f bits/token)%s\n", r.perplexity(),
                static_cast<long long>(r.scored), opt.file.c_str(), r.mean_nll(), r.mean_nll() / std::log(2.0),
                r.interrupted ? " (interrupted: only the tokens scored so far)" : "");
    std::printf("%lld windows of %lld ids, stride %lld | %.2f s, %.1f tokens/s | kernels %s, %d threads\n",
                static_cast<long long>(r.windows), static_cast<long long>(r.window), static_cast<long long>(r.stride),
                r.seconds, r.seconds > 0 ? static_cast<double>(r.scored) / r.seconds : 0.0,
                runtime.model().kernel_set().c_str(), runtime.model().threads());
  }
  std::fflush(stdout);
  return r.interrupted ? static_cast<int>(ExitCode::interrupted) : 0;
}

}  // namespace

Command register_perplexity(CLI::App& app, GlobalOptions& global) {
  auto* sub = app.add_subcommand("perplexity",
                                 "Perplexity of the pipeline's model over a text file: sliding windows, exact "
                                 "(docs/demo-model.md)");
  auto opt = std::make_shared<PerplexityOptions>();
  sub->add_option("FILE", opt->file, "The text to score (plain text; BOS is put in front once)")->required();
  sub->add_option("--window", opt->window, "Ids per window: the most context any token is scored with")
      ->capture_default_str();
  sub->add_option("--stride", opt->stride, "Ids between window starts (0: half the window); each id is scored once")
      ->capture_default_str();
  sub->add_flag("--json", opt->json, "Print the result as JSON (round-trip doubles) instead of text");
  sub->footer(
      "Chunks inside a window: job.prefill_chunk. Ctrl-C stops after the current chunk and prints what was "
      "scored (exit 5). Exit codes: 0 ok, 1 runtime failure, 2 usage, 3 the plan does not fit, 4 a routed "
      "expert failed to load, 5 interrupted.");
  return {sub, [&global, opt]() { return run_perplexity(global, *opt); }};
}

}  // namespace k3::cli
