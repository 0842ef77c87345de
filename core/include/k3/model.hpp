// The model and a conversation over it: the public face of the forward pass.
//
//   k3::PluginHost host;
//   k3::Model model(uri, host, settings);          // index, bind, read weights via storage
//   k3::Session session(model, 4096);
//   session.feed(prompt_ids, /*all_positions=*/false, logits);   // prefill
//   session.feed({next_id}, false, logits);                       // one decode step
//
// Output bits depend only on the checkpoint and the token ids: not on the kernel set, the
// thread count, the storage backend, or how the tokens are split into feed() calls.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <k3/model_config.hpp>
#include <k3/plan.hpp>
#include <k3/plugin_host.hpp>

namespace k3 {

class PassLink;

/// ModelSettings::min_parallel_work's default: about 0.1 ms of fp64 work on one core here.
inline constexpr std::size_t kMinParallelWork = std::size_t{1} << 19;

struct ModelSettings {
  std::string storage = "posix";  ///< storage plugin name
  PluginParams storage_params;
  std::string kernels = "auto";  ///< kernel set name or "auto" (highest score that runs here)
  PluginParams kernel_params;
  int threads = 0;  ///< 0 = every core
  /// Multiply-adds below which a matrix product, or a pass's per-sequence attention and
  /// recurrence, runs on the calling thread: waking a sleeping thread costs more than such
  /// work (docs/benchmarks-log.md, "Small work on one thread"). Never changes a bit; 0 splits
  /// everything, which tests use to run the threaded paths on small models.
  std::size_t min_parallel_work = kMinParallelWork;
  /// Memory budgets (docs/streaming.md). The default sizes both budgets from the available
  /// memory ("fit"); a plan that holds everything keeps the model resident, otherwise the
  /// trunk and the routed experts stream. A plan that does not fit is refused (exit 3).
  PlanInputs memory;
  std::string cache_policy = "lru";  ///< expert cache policy plugin
  PluginParams cache_params;
  /// cache.future: the trace of an earlier run of this pipeline (trace.out). Checked against
  /// the model whenever set (UsageError for another geometry, architecture or checkpoint,
  /// or a trace that records no checkpoint identity); read whole
  /// for a policy that wants the future (belady), which requires it.
  std::filesystem::path cache_future;
  int expert_read_attempts = 3;  ///< reads of a routed expert before it counts as failed
  /// cache.prefetch.*: router-lookahead prefetch of routed experts (docs/cache.md). Depth in
  /// MoE layers (0 = off); bytes read ahead per token of a forward pass (0 = no limit).
  std::size_t prefetch_depth = 0;
  std::uint64_t prefetch_bytes_per_token = 0;
  /// A rank of a model split over ranks (k3/cluster.hpp): given the model's config, the
  /// layers [first, last) this process holds (the embedding with layer 0, lm_head with the
  /// last). Empty: every layer.
  std::function<std::pair<std::size_t, std::size_t>(const ModelConfig&)> layers;
  /// model.packed_trunk: a folder written by `k3host pack-trunk` from this checkpoint; the
  /// trunk and tables are read from its trunk.bin (a layer is one aligned read) instead of
  /// the shards. Refused (UsageError) when packed from another checkpoint (its identity) or
  /// malformed; every byte read from it is checked against trunk.json (RuntimeError naming
  /// trunk.bin, the run and the offset when one differs).
  std::filesystem::path packed_trunk;
};

/// The plugin objects a model runs on, with their plugin names. A run creates each once
/// (k3/pipeline_plugins.hpp: while it checks the pipeline's plugin sections, so a mistake is
/// reported at its line) and hands them to the model; a draft model is handed the run's own
/// storage and kernel set. The cache policy may be null for a model that must be resident:
/// without one, a plan that streams is refused.
struct ModelPlugins {
  std::shared_ptr<sdk::StorageBackend> storage;
  std::shared_ptr<sdk::KernelSet> kernels;
  std::string kernel_name;  ///< the plugin name ("auto" already resolved)
  std::shared_ptr<sdk::CachePolicy> cache;
  std::string storage_name;  ///< the storage plugin's name
  std::string cache_name;    ///< the cache policy's name (empty without one)
};

/// Creates the storage, kernel set ("auto": the best set that runs here) and cache policy
/// `settings` names. UsageError naming the plugin for a bad name or parameter.
ModelPlugins create_model_plugins(PluginHost& host, const ModelSettings& settings);

/// What the model read from storage and how the expert cache did, since it was loaded.
struct StreamStats {
  std::uint64_t trunk_bytes = 0;      ///< non-expert layer tensors (pinned + ring)
  std::uint64_t expert_bytes = 0;     ///< routed experts
  std::uint64_t table_bytes = 0;      ///< embedding, lm_head, global norms
  std::uint64_t expert_requests = 0;  ///< (token, layer, expert) requests
  std::uint64_t expert_hits = 0;  ///< requests found resident (true hits: a prefetched expert's first use is not one)
  /// Router-lookahead prefetch (cache.prefetch, docs/cache.md "Router-lookahead prefetch").
  std::uint64_t prefetch_experts = 0;       ///< experts read ahead
  std::uint64_t prefetch_bytes = 0;         ///< their bytes
  std::uint64_t prefetch_used = 0;          ///< of those, requested later (each once)
  std::uint64_t prefetch_wasted_bytes = 0;  ///< bytes read ahead and not requested (yet)
  std::uint64_t prefetch_hits = 0;          ///< requests served by a prefetched expert
  /// The predictor over distinct experts per (chunk, predicted layer): predicted, truly
  /// routed, and both (recall = correct/routed, precision = correct/predicted).
  std::uint64_t lookahead_predicted = 0, lookahead_routed = 0, lookahead_correct = 0;
  double io_wait_seconds = 0;  ///< the compute thread waited for storage
  /// Of io_wait_seconds, the waits for routed experts (the rest: trunk layers and the
  /// embedding and lm_head tables).
  double expert_wait_seconds = 0;
  double read_seconds = 0;  ///< time inside storage reads, all threads
  /// Time spent checking the bytes read from a packed trunk against its checksums, all
  /// threads (0 without model.packed_trunk); the reader threads' part overlaps the compute.
  double verify_seconds = 0;
  std::vector<std::string> expert_failures;  ///< "layer L expert E: ..." (ids unsound)
};

/// The checkpoint identity of a model (k3/checkpoint.hpp) and what computing it at open cost.
struct CheckpointIdentity {
  std::uint64_t value = 0;          ///< checkpoint_identity(config, index)
  std::size_t shards = 0;           ///< shards hashed
  std::uint64_t sampled_bytes = 0;  ///< tensor bytes read for the samples
  double seconds = 0;               ///< reading and hashing the samples, summed over threads
};

/// Observes every routed-expert request: (position, layer, experts in top-k order).
class RoutingListener {
 public:
  virtual ~RoutingListener() = default;
  /// A serving group starts: the next `tokens` on_route calls (one forward chunk at `layer`)
  /// are served together by the expert cache (the groups of a trace, k3/trace.hpp).
  virtual void on_group(std::size_t /*layer*/, std::size_t /*tokens*/) {}
  virtual void on_route(std::int64_t position, std::size_t layer, std::span<const std::uint32_t> experts) = 0;
};

class Model {
 public:
  /// Loads the checkpoint at `uri` (a folder or a URL: config.json, index json, shards)
  /// through the plugins named in `settings`; every byte comes through the storage plugin.
  /// UsageError (exit 2) for a bad checkpoint or plugin name, before any compute.
  Model(const std::string& uri, PluginHost& host, const ModelSettings& settings);
  /// The same with plugin objects already created (create_model_plugins); the plugin names
  /// and parameters of `settings` are not used.
  Model(const std::string& uri, ModelPlugins plugins, const ModelSettings& settings);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  [[nodiscard]] const ModelConfig& config() const noexcept;
  [[nodiscard]] const std::string& uri() const noexcept;
  /// What the checkpoint's weights are: every file derived from it records this value
  /// (docs/architecture.md, "Checkpoint identity").
  [[nodiscard]] const CheckpointIdentity& identity() const noexcept;
  /// The storage backend the checkpoint is read through (for files next to it, e.g. the
  /// tokenizer's: PluginHost::set_file_storage).
  [[nodiscard]] const std::shared_ptr<sdk::StorageBackend>& storage() const noexcept;
  [[nodiscard]] std::string kernel_set() const;  ///< the name of the set in use
  /// The kernel set in use (a draft model runs on its target's).
  [[nodiscard]] const std::shared_ptr<sdk::KernelSet>& kernels() const noexcept;
  [[nodiscard]] const std::string& storage_plugin() const noexcept;  ///< the storage plugin's name
  [[nodiscard]] const std::string& cache_policy() const noexcept;    ///< the cache policy's name
  [[nodiscard]] int threads() const noexcept;
  [[nodiscard]] std::uint64_t weight_bytes_read() const noexcept;
  /// The memory plan the model was loaded with.
  [[nodiscard]] const MemoryPlan& plan() const noexcept;
  /// True when the trunk or the experts stream (the plan did not hold everything).
  [[nodiscard]] bool streaming() const noexcept;
  [[nodiscard]] StreamStats stream_stats() const;

  /// Rank 0 of a model split over ranks: every pass (k3::BatchForward) runs this rank's
  /// layers, then goes through `link` for the rest (k3/batch.hpp PassLink). Not owned; null
  /// to stop.
  void set_pass_link(PassLink* link) noexcept;

  struct Impl;
  [[nodiscard]] Impl& impl() noexcept { return *impl_; }

 private:
  /// Both public constructors: `make_plugins` runs once the checkpoint and the plan passed.
  Model(const std::string& uri, const std::function<ModelPlugins()>& make_plugins, const ModelSettings& settings);
  std::unique_ptr<Impl> impl_;
};

/// An in-memory copy of everything a Session carries (its tokens, the KDA recurrent state,
/// the MLA latent cache, its pending ids and whether it is unsound), taken by
/// Session::snapshot(). The KDA state cannot be rewound, so a
/// conversation that wants to go back to an earlier point (a server's prefix reuse, a chat's
/// edit of the last turn) keeps snapshots. Exactness: a session restored from a snapshot is
/// indistinguishable from one that never left that point; what it is fed next gives
/// bit-identical logits. Immutable once taken: copies share the same bytes, and a snapshot
/// may be read from any thread while sessions restore from it.
class SessionSnapshot {
 public:
  SessionSnapshot() = default;  ///< empty: no tokens, nothing to restore
  [[nodiscard]] bool empty() const noexcept { return impl_ == nullptr; }
  /// The tokens the session had fed (empty for an empty snapshot).
  [[nodiscard]] const std::vector<std::uint32_t>& tokens() const noexcept;
  /// Its pending ids (Session::pending), restored with it.
  [[nodiscard]] const std::vector<std::uint32_t>& pending() const noexcept;
  [[nodiscard]] std::int64_t position() const noexcept;
  /// Bytes held (state floats and token ids): what a budget of snapshots counts.
  [[nodiscard]] std::size_t bytes() const noexcept;

  struct Impl;

 private:
  friend class Session;
  std::shared_ptr<const Impl> impl_;
};

class Session {
 public:
  /// A fresh conversation of up to `max_positions` tokens.
  Session(Model& model, std::int64_t max_positions);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Runs `tokens` after everything fed so far. `logits` receives [n, vocab] floats, with
  /// n = tokens.size() when all_positions, else 1 (the last token). Ids outside the
  /// vocabulary or beyond max_positions are refused (UsageError) before any compute.
  void feed(std::span<const std::uint32_t> tokens, bool all_positions, std::vector<float>& logits);
  /// Speculative verification: runs `tokens` after everything fed so far like
  /// feed(tokens, true, logits), then keeps only the first keep(logits) of them (0 … n; more
  /// is an error): afterwards the session is bit for bit as if only those had been fed. The
  /// rest leave no trace in the carried state (the KDA layers run on a copy and the kept
  /// tokens' updates are replayed; the MLA cache is cut back). If the forward pass throws,
  /// nothing is kept. Returns the number kept.
  std::size_t feed_tentative(std::span<const std::uint32_t> tokens, std::vector<float>& logits,
                             const std::function<std::size_t(std::span<const float>)>& keep);
  /// After a batched pass (k3/batch.hpp) fed this session a tentative chunk: keeps its first
  /// `keep` tokens (0 … its length; more is an error), exactly as feed_tentative() would.
  /// Until then the session refuses to be fed, snapshotted or saved (RuntimeError).
  void keep_tentative(std::size_t keep);
  /// The model it runs on.
  [[nodiscard]] Model& model() const noexcept;
  /// Tokens consumed so far, in order.
  [[nodiscard]] const std::vector<std::uint32_t>& tokens() const noexcept;
  [[nodiscard]] std::int64_t position() const noexcept;
  [[nodiscard]] std::int64_t max_positions() const noexcept;
  /// Ids of the conversation not fed yet: generate() leaves its last token here (its
  /// successor was not needed) and the rest of a prefill it stopped early, and feeds them
  /// first the next time. feed() does not look at them; save() and load() keep them, so a
  /// resumed conversation continues exactly where the saved one stopped.
  [[nodiscard]] const std::vector<std::uint32_t>& pending() const noexcept;
  /// Replaces the pending ids. Ids outside the vocabulary are refused (UsageError).
  void set_pending(std::vector<std::uint32_t> ids);
  /// Forget everything fed and pending (keeps max_positions).
  void reset();
  /// Sees every routing decision from now on (nullptr to stop). Not owned.
  void set_routing_listener(RoutingListener* listener) noexcept;

  /// State files: magic, version, architecture fingerprint, checkpoint identity, payload
  /// checksum; the ids fed, the pending ids and the carried state
  /// (core/src/engine/session_impl.hpp); written to a temporary name and renamed. load()
  /// refuses another checkpoint's state (naming both identities), another format version
  /// and a damaged file (UsageError naming the file).
  ///
  /// A state is unsound when the run that produced it lost a routed expert (its
  /// contributions were zero, so the carried state is not the model's): save() records the
  /// reason given, and load() refuses such a file naming it unless `accept_unsound`. A state
  /// loaded unsound stays unsound in every later save.
  void save(const std::filesystem::path& file, std::string_view unsound = {}) const;
  void load(const std::filesystem::path& file, bool accept_unsound = false);

  /// The state now, in memory (see SessionSnapshot). Costs a copy of the state.
  [[nodiscard]] SessionSnapshot snapshot() const;
  /// Goes back (or forward) to `snap`: afterwards tokens(), pending(), position() and
  /// everything fed next are exactly as if this Session had been fed snap.tokens() from
  /// fresh (and given snap.pending()). UsageError
  /// for an empty snapshot, one of another checkpoint, or one longer than
  /// max_positions; the session is unchanged then.
  void restore(const SessionSnapshot& snap);

  struct Impl;
  [[nodiscard]] Impl& impl() noexcept { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace k3
