// cluster.transport set (docs/cluster.md): this process is one rank of a model split over
// ranks, started by the launcher (mpirun). Rank 0 runs the front end (the batch job,
// --prompts or serve) as one process would and then tells every rank to end with its exit
// code; the others run their layers of every pass until then.
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <k3/error.hpp>
#include <k3/log.hpp>
#include <k3/runtime.hpp>

#include "run_job.hpp"
#include "stop_signal.hpp"

namespace k3::cli {

int run_ranks(const Pipeline& joined, RunSequences sequences,
              const std::function<int(const Pipeline&, Cluster&)>& front_end) {
  // Every rank reads the same pipeline, so a refusal here is every rank's alike (exit 2).
  const std::unique_ptr<Cluster> cluster = Cluster::join(joined);
  const Pipeline mine = joined.for_rank(cluster->rank());
  if (cluster->rank() != 0) {
    const StopSignal stop;
    LoadHooks hooks;
    hooks.stop = &stop.flag();
    hooks.on_status = [](const std::string& s) { log(LogLevel::info, "", s); };
    hooks.on_plan = [](const std::string& table) { log_text(LogLevel::info, table); };
    return cluster->serve(mine, hooks, sequences);
  }
  int code = 0;
  try {
    code = front_end(mine, *cluster);
  } catch (const Error& e) {
    const std::string what = e.what();
    cluster->finish(static_cast<int>(e.code()), what.rfind("rank ", 0) == 0 ? what : "rank 0: " + what);
    throw;
  } catch (const std::exception& e) {
    cluster->finish(static_cast<int>(ExitCode::runtime), std::string("rank 0: ") + e.what());
    throw;
  }
  std::string reason;
  if (code != 0) {
    const std::optional<Cluster::Failure> failure = cluster->failure();
    reason = failure && failure->code == code ? failure->reason
                                              : "rank 0 ended the run with exit code " + std::to_string(code);
  }
  cluster->finish(code, reason);
  return code;
}

int run_cluster(const Pipeline& joined, bool quiet) {
  const bool prompts = !joined.get_path("job.prompts").empty();
  return run_ranks(joined, prompts ? RunSequences::batched : RunSequences::one,
                   [&](const Pipeline& mine, Cluster& cluster) {
    return prompts ? run_prompts_file(mine, &cluster) : run_pipeline(mine, quiet, &cluster);
  });
}

}  // namespace k3::cli
