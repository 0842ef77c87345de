// run_bench: the repetitions of every pipeline, interleaved A1 B1 A2 B2 ..., so that a
// machine that slows down or speeds up during the bench affects every pipeline alike.
#include <k3/bench.hpp>
#include <k3/error.hpp>

namespace k3 {
namespace {

std::string label_of(std::size_t i) { return std::string(1, static_cast<char>('A' + i)); }

bool stop_requested(const LoadHooks& hooks) { return hooks.stop != nullptr && hooks.stop->load(); }

}  // namespace

BenchResult run_bench(const BenchRequest& request, const LoadHooks& hooks, const BenchProgress& progress) {
  if (request.pipelines.empty()) throw UsageError("bench: no pipeline given");
  if (request.pipelines.size() > 26) throw UsageError("bench: at most 26 pipelines (A … Z) in one bench");
  if (request.repetitions < 1) throw UsageError("bench: the repetitions must be at least 1");
  BenchResult result;
  result.repetitions = request.repetitions;
  result.reload = request.reload;
  const std::size_t n = request.pipelines.size();
  for (std::size_t i = 0; i < n; ++i) result.pipelines.push_back({label_of(i), request.pipelines[i].config, {}, {}});

  // Kept workers (reload off): every pipeline loaded and warmed up first, one after the
  // other (never two loads at once: they would share the demo checkpoint's first write).
  std::vector<std::unique_ptr<BenchWorker>> kept;
  auto start = [&](std::size_t i, const std::string& warmup) {
    BenchSettings settings = request.settings;
    settings.streams = request.pipelines[i].streams;
    auto w = std::make_unique<BenchWorker>(request.pipelines[i].pipeline, settings, hooks, progress, warmup);
    if (result.pipelines[i].samples.empty()) result.pipelines[i].info = w->info();
    return w;
  };
  if (!request.reload)
    for (std::size_t i = 0; i < n && !stop_requested(hooks); ++i) kept.push_back(start(i, "warm-up " + label_of(i)));

  const std::size_t total = n * static_cast<std::size_t>(request.repetitions);
  for (std::size_t run = 0; run < total && !stop_requested(hooks); ++run) {
    const std::size_t i = run % n, rep = run / n;
    const std::string tag = label_of(i) + " repetition " + std::to_string(rep + 1) + "/" +
                            std::to_string(request.repetitions);
    const std::string what = "run " + std::to_string(run + 1) + "/" + std::to_string(total) + ": " + tag;
    std::unique_ptr<BenchWorker> fresh;
    if (request.reload) fresh = start(i, "warm-up " + tag);
    if (stop_requested(hooks)) break;
    BenchSample s = (request.reload ? *fresh : *kept[i]).run(what);
    if (s.interrupted) break;  // cut short: its numbers are not a repetition's
    result.pipelines[i].samples.push_back(std::move(s));
    result.order.emplace_back(i, rep);
  }
  result.interrupted = stop_requested(hooks);
  return result;
}

}  // namespace k3
