// The main job: k3host --config PIPELINE [--set k=v]... runs the pipeline's job. Its prompt,
// length and sampling flags (-p, -n, --temp ...) are pipeline flags (pipeline_flags.cpp).
#pragma once
#include <functional>
#include <string>

#include <k3/cluster.hpp>
#include <k3/runtime.hpp>

#include "cli.hpp"

namespace k3::cli {

struct RunOptions {
  bool print_config = false;  ///< --print-config: print the merged pipeline, run nothing
  bool list_presets = false;  ///< --list-presets: list presets/*.yaml, run nothing
  bool print_schema = false;  ///< --print-schema: print every pipeline key (Markdown), run nothing
  std::string presets_dir;    ///< --presets-dir (default: ./presets, else the installed ones)
  bool version = false;       ///< --version: version, commit, compiler, kernel sets; run nothing
};

void add_run_options(CLI::App& app, RunOptions& run);
int run_job(const GlobalOptions& global, const RunOptions& run);
/// job.prompts set: every prompt of the file, generated together (run_prompts.cpp).
/// For the length of a run on rank 0 of a split model: a stop request ends a wait for
/// another rank too.
class ClusterStopScope {
 public:
  ClusterStopScope(Cluster* cluster, const std::atomic<bool>* flag) : cluster_(cluster) {
    if (cluster_ != nullptr) cluster_->set_stop_flag(flag);
  }
  ~ClusterStopScope() {
    if (cluster_ != nullptr) cluster_->set_stop_flag(nullptr);
  }
  ClusterStopScope(const ClusterStopScope&) = delete;
  ClusterStopScope& operator=(const ClusterStopScope&) = delete;

 private:
  Cluster* cluster_;
};

/// `cluster` (rank 0 of a model split over ranks, run_cluster.cpp): passes go through it.
int run_prompts_file(const Pipeline& pipeline, Cluster* cluster = nullptr);
/// The batch job of one prompt (run_job.cpp).
int run_pipeline(const Pipeline& pipeline, bool quiet, Cluster* cluster = nullptr);
/// cluster.transport set: this process is one rank of a model split over ranks
/// (run_cluster.cpp); rank 0 runs the job, the others their layers.
int run_cluster(const Pipeline& pipeline, bool quiet);
/// The same for any front end: joins the ranks; rank 0 runs `front_end` on its own
/// pipeline (cluster.ranks.0 applied) and then tells every rank to end with its code (or
/// its error's); the others run their layers of every pass, planned for `sequences` as
/// the front end plans them.
int run_ranks(const Pipeline& joined, RunSequences sequences,
              const std::function<int(const Pipeline&, Cluster&)>& front_end);

}  // namespace k3::cli
