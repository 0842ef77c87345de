// A model split over ranks (docs/cluster.md): processes, on one machine or several, each
// holding a contiguous range of layers in its own memory and reading the rest of them from
// its own storage. Rank 0 runs the job (the front end, the tokenizer, the embedding and its
// layers); every pass's activations go from rank to rank as raw bytes through a transport
// plugin (sdk/k3/transport.hpp; `mpi`); the last rank picks the next ids (the sampler is a
// function of the logits, the settings, the position and the ids before it, which every rank
// holds) and only those come back to rank 0, with the logits rows it asks for (a dump). The
// output bits are the same as one process's: every rank computes its
// layers exactly as one process would, on exactly the bytes one process would hold.
//
//   std::unique_ptr<k3::Cluster> c = k3::Cluster::join(pipeline);   // cluster.transport
//   const k3::Pipeline mine = pipeline.for_rank(c->rank());
//   if (c->rank() == 0) { hooks.cluster = c.get(); run_job(mine, hooks); c->finish(code, why); }
//   else code = c->serve(mine, hooks);
//
// Failure: a rank whose storage fails, that cannot plan its range or that is stopped sends
// an error message on; it travels to rank 0, which ends the run with that error's exit code
// ("rank 2: ..."), and finish() tells every rank to end with it. A rank that dies outright
// is reported by the launcher (mpirun ends the others).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <k3/model_config.hpp>
#include <k3/pipeline.hpp>
#include <k3/runtime.hpp>

namespace k3 {


/// Layers [first, last) of a rank.
struct LayerRange {
  std::size_t first = 0, last = 0;
};

/// cluster.layers for `ranks` ranks of a model with `config`: auto (contiguous ranges
/// balanced by the bytes of each layer's trunk tensors and routed experts) or the explicit
/// ranges. UsageError at the key for ranges that do not cover every layer once, in order,
/// one per rank, or more ranks than layers.
std::vector<LayerRange> cluster_layer_ranges(const Pipeline& pipeline, const ModelConfig& config, int ranks);

/// The bytes a pass of `rows` tokens of one sequence sends from rank to rank into layer
/// `layer` (0 < layer < the layer count): its header, the sequence, the token ids, the hidden
/// state and the AttnRes block snapshots taken before `layer`. `layer` == the layer count:
/// what the last rank sends back to rank 0 (the header and every row's logits).
[[nodiscard]] std::uint64_t cluster_pass_bytes(const ModelConfig& config, std::size_t layer, std::uint64_t rows);

class Cluster {
 public:
  /// Joins the job of ranks this process was started in, through the transport plugin
  /// cluster.transport names (created once, here). UsageError for `none`, for a job of one
  /// rank, and for a pipeline that asks what a split model does not do yet (a state file,
  /// trace.out, cache.future).
  static std::unique_ptr<Cluster> join(const Pipeline& pipeline);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  [[nodiscard]] int rank() const noexcept;
  [[nodiscard]] int size() const noexcept;

  /// By Runtime: the layers of this rank for the model's config (cluster.layers of
  /// `pipeline`, the same on every rank).
  [[nodiscard]] LayerRange layers_of(const Pipeline& pipeline, const ModelConfig& config) const;
  /// Rank 0, by Runtime once its model is loaded: waits until every rank has loaded its own
  /// (or throws the first failure, "rank N: ...", with its exit code), then hands every
  /// pass of `model` through the ranks.
  void attach(Model& model);

  /// Ranks > 0: loads this rank's layers of `pipeline` (for_rank already applied), planned
  /// for `sequences` as rank 0's front end plans them (the batch job: one; `--prompts` and
  /// `serve`: batched), and runs its share of every pass until rank 0 says stop. Returns the
  /// exit code to end with: rank 0's, or this rank's own failure's when rank 0 could not be
  /// told.
  int serve(const Pipeline& pipeline, const LoadHooks& hooks, RunSequences sequences);

  /// Rank 0: the first failure a later rank sent back ("rank N: ..." and its exit code),
  /// once a pass has met it; none while every rank runs. Any thread may ask (a server's
  /// main thread, while its scheduler's thread runs the passes).
  struct Failure {
    int code = 0;
    std::string reason;
  };
  [[nodiscard]] std::optional<Failure> failure() const;

  /// Rank 0 at the end of its run: tells every rank to end with `code` (the reason logged by
  /// each when not 0) and waits, at most 10 s, until they have.
  void finish(int code, const std::string& reason) noexcept;

  /// Rank 0: while set, `flag` (the CLI's StopSignal) ends a wait for another rank
  /// (k3::Error interrupted). Null to clear, before the flag goes.
  void set_stop_flag(const std::atomic<bool>* flag);

  /// Bytes sent by this rank so far (headers included), for the bench and the docs.
  [[nodiscard]] std::uint64_t bytes_sent() const noexcept;

  struct Impl;

 private:
  explicit Cluster(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace k3
