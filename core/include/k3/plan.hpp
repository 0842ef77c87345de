// The memory plan (docs/architecture.md): computed from the geometry and the pipeline's
// memory section before anything is allocated, printed, and refused (exit 3) when it does
// not fit in the memory this machine has available.
//
//   k3::PlanInputs in = k3::plan_inputs(pipeline);
//   k3::MemoryPlan plan = k3::plan_memory(config, in);   // sizes only, no weights needed
//   std::fputs(plan.table().c_str(), stdout);
//   k3::require_fit(plan);                                // k3::Error(ExitCode::resource)
//
// Every figure is bytes. Budgets are GB of 1e9 bytes and may be fractions (0.0005 = 500 kB),
// so a test can make the tiny models stream. "fit" budgets are sized from the available
// memory, trunk first. The plan is a forecast: the authoritative figure is the peak RSS the
// run reports.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <k3/model_config.hpp>

namespace k3 {

class Pipeline;

struct PlanInputs {
  std::optional<double> trunk_gb;         ///< nullopt = fit
  std::optional<double> expert_cache_gb;  ///< nullopt = fit
  bool stream_embedding = false;          ///< lm_head in row chunks too (ultra)
  /// Streamed dense layers whose FFN is far larger than the other layers (K3 layer 0) can
  /// keep only their attention part in a ring slot and multiply the FFN while reading it in
  /// row chunks. automatic: when that streams fewer bytes per token within the budget.
  enum class SplitDenseFfn { automatic, on, off } split_dense_ffn = SplitDenseFfn::automatic;
  std::uint64_t row_chunk_bytes = 0;   ///< per row-chunk buffer; 0 = 32 MiB
  std::int64_t context = 4096;         ///< positions of MLA latent KV to reserve
  std::int64_t prefill_chunk = 64;     ///< tokens per forward call (activation buffers)
  std::int64_t threads = 1;            ///< compute threads (each has its own attention scratch)
  std::int64_t speculative_draft = 0;  ///< job.speculative.max_draft: verification journals
  /// Sequences decoded together (serve.parallel, for `serve` and `--prompts`), each with its
  /// own KDA state, MLA latent KV of `context` positions and journals; 0 = auto: the most, up
  /// to kAutoParallel, whose sequences take at most a quarter of the available memory in a
  /// plan that fits. A run of one prompt plans 1.
  std::int64_t parallel = 1;
  /// Prompt tokens one step of several sequences feeds in all (serve.prefill_budget);
  /// 0 = prefill_chunk.
  std::int64_t prefill_budget = 0;
  std::uint64_t available = 0;  ///< bytes; 0 = measure (MemAvailable, cgroup)
  /// memory.budgets_for: the model whose bytes the fixed budgets are. Unset: this model's.
  /// Set (k3): a model with fewer trunk (expert) bytes gets trunk_gb (expert_cache_gb)
  /// scaled by its share, never scaled up; "fit" budgets are never scaled.
  struct BudgetsFor {
    std::string name;                ///< the geometry ("k3")
    std::uint64_t trunk_bytes = 0;   ///< its trunk layers, as the plan holds them
    std::uint64_t expert_bytes = 0;  ///< all its routed experts' slots
  };
  std::optional<BudgetsFor> budgets_for;
  /// A rank of a model split over ranks (docs/cluster.md) holds layers [first_layer,
  /// last_layer) only, with the embedding when first_layer is 0 and the final norm and
  /// lm_head when last_layer is the last; last_layer 0 = every layer.
  std::size_t first_layer = 0, last_layer = 0;
  /// cache.prefetch.router: what the router lookahead predicts a streamed MoE layer with
  /// when its exact router is not in memory. exact: nothing (only routers at hand); int8 /
  /// int4: a resident quantised copy of every streamed MoE layer's router (its own plan
  /// line); automatic: the most precise copy that takes at most kRouterCopyShare of the rest
  /// of the plan, else none.
  enum class RouterCopy { automatic, exact, int8, int4 } router_copy = RouterCopy::automatic;
  bool lookahead = true;  ///< cache.prefetch.depth > 0: no copies without a lookahead
};

/// The share of the rest of the plan that cache.prefetch.router auto lets the copies add: a
/// sixteenth, so a preset's plan grows by at most 6% (K3 at laptop: int4, 0.30 GB on 7.0 GB;
/// at ultra, 2.7 GB: none, as int4 would add 11%).
inline constexpr double kRouterCopyShare = 0.0625;

/// One router copy's bytes (maths/router_copy.hpp holds exactly these): `experts` rows of
/// `cols` weights at `bits` (8: a byte each; 4: two a byte), an fp32 scale and bias a row.
[[nodiscard]] constexpr std::uint64_t router_copy_bytes(std::uint64_t experts, std::uint64_t cols, int bits) noexcept {
  return experts * ((bits == 8 ? cols : (cols + 1) / 2) + 2 * sizeof(float));
}

/// memory.* and job.prefill_chunk of a loaded pipeline, for a run of one sequence.
PlanInputs plan_inputs(const Pipeline& pipeline);
/// The same for a run that decodes serve.parallel sequences together (`serve`, `--prompts`),
/// with serve.prefill_budget.
PlanInputs batched_plan_inputs(const Pipeline& pipeline);

/// serve.parallel 0 plans at most this many sequences.
inline constexpr std::int64_t kAutoParallel = 8;

/// The sizes memory.budgets_for scales by: the trunk and expert bytes of geometry `name`
/// (configs/models/<name>.yaml).
PlanInputs::BudgetsFor budgets_of(const std::string& geometry);

/// What this process may still use: min(MemAvailable, cgroup memory.max - memory.current).
/// `source` (optional) receives a short description of where the figure came from.
std::uint64_t available_memory(std::string* source = nullptr);

/// The buffers one forward call works in, named by block, as element counts (floats unless
/// a field says doubles or u32). Sized for chunks of up to `chunk` tokens over `positions`
/// positions; a session allocates them once when it starts (maths/run_buffers.hpp) and the
/// forward pass only works in them, so decoding a token allocates nothing.
struct RunBufferSizes {
  std::uint64_t chunk = 0;                                 ///< tokens per forward call at most
  std::uint64_t positions = 0;                             ///< the context: MLA attends over up to this many
  struct Stack {                                           ///< the decoder stack (maths/forward.cpp)
    std::uint64_t prefix = 0, h = 0, normed = 0, out = 0;  ///< [chunk, E] each
    std::uint64_t bank = 0;                                ///< AttnRes block snapshots [blocks, chunk, E]
    std::uint64_t bank_rows = 0;                           ///< row pointers of one aggregation: blocks + 1
  } stack;
  struct AttnRes {
    std::uint64_t fold = 0, scores = 0;  ///< doubles: [E], [blocks + 1]
  } attn_res;
  struct Kda {
    std::uint64_t q = 0, k = 0, v = 0, z = 0, g = 0, y = 0;  ///< [chunk, H·D] each
    std::uint64_t fa = 0, b = 0, u = 0;                      ///< [chunk, D], [chunk, H], [lanes, D]
    std::uint64_t alpha = 0, bk = 0;                         ///< doubles: [lanes, D] each
  } kda;
  struct Mla {
    std::uint64_t ql = 0, q = 0, ckv = 0, gate = 0, y = 0;  ///< [chunk, …] projections
    std::uint64_t qlat = 0, cbar = 0;                       ///< [lanes, kv_lora]
    std::uint64_t scores = 0, acc = 0;                      ///< doubles: [lanes, positions], [lanes, 8·kv_lora]
  } mla;
  struct Moe {
    std::uint64_t logits = 0, z = 0, r = 0, shared_gate = 0, shared_up = 0, shared_out = 0;
    std::uint64_t contrib = 0;                                     ///< [chunk·top_k, latent]
    std::uint64_t gather = 0, h1 = 0, h3 = 0, expert_out = 0;      ///< one expert's tokens (≤ chunk)
    std::uint64_t weights = 0, choice = 0;                         ///< doubles: [chunk·top_k], [experts]
    std::uint64_t ids = 0, users = 0, user_start = 0, unique = 0;  ///< u32 routing tables
    std::uint64_t ahead_count = 0, ahead_ids = 0, ahead_topk = 0;  ///< u32, the router lookahead's
    std::uint64_t ahead_score = 0;                                 ///< doubles, the router lookahead's
  } moe;
  struct Dense {
    std::uint64_t g = 0, u = 0;  ///< [chunk, intermediate]
  } dense;

  [[nodiscard]] std::uint64_t bytes() const;
};

/// The run buffers for chunks of up to `chunk` tokens and `positions` positions, on `lanes`
/// compute threads: each thread that runs a sequence's attention or recurrence has scratch
/// of its own (maths/parallel_items.hpp).
RunBufferSizes run_buffer_sizes(const ModelConfig& config, std::int64_t chunk, std::int64_t positions,
                                std::int64_t lanes);

struct MemoryPlan {
  std::uint64_t available = 0;
  std::string available_source;
  std::uint64_t trunk_budget = 0, expert_budget = 0;  ///< after "fit" sizing and scaling
  /// memory.budgets_for: whose bytes the fixed budgets were ("" this model's), and the
  /// factor each was scaled by (1 when not scaled).
  std::string budgets_for;
  double trunk_scale = 1, expert_scale = 1;
  bool trunk_fit = false, expert_fit = false;  ///< sized from available memory

  // Trunk: every layer's non-expert tensors as held in memory.
  std::vector<std::uint64_t> layer_bytes;  ///< per layer, the size of one binding
  std::vector<bool> pinned;                ///< per layer (false for a layer this rank does not hold)
  /// The layers this process holds, [first_layer, last_layer): all of them unless the model
  /// is split over ranks (PlanInputs::first_layer); the others cost nothing here.
  std::size_t first_layer = 0, last_layer = 0;
  std::size_t pinned_count = 0;
  std::uint64_t pinned_bytes = 0;
  std::size_t ring_slots = 0;         ///< 0 when every layer is pinned
  std::uint64_t ring_slot_bytes = 0;  ///< the largest unpinned layer (its ring part)
  /// Per layer, the bytes without the dense FFN (== layer_bytes for MoE layers).
  std::vector<std::uint64_t> layer_core_bytes;
  /// Streamed dense layers hold only their core in a ring slot; the FFN is read in row
  /// chunks as it is multiplied (docs/streaming.md "Split dense layers").
  bool split_dense_ffn = false;
  std::size_t split_layers = 0;  ///< streamed dense layers served split
  /// Row-chunk buffers shared by split FFNs and a streamed lm_head (two: one being read
  /// while the other is multiplied); row_chunk_bytes each.
  std::uint64_t row_chunk_bytes = 0;
  std::uint64_t row_chunk_buffers = 0;
  /// Bytes read from storage per token for the trunk: every streamed layer, whole.
  std::uint64_t streamed_trunk_bytes = 0;

  // Routed experts.
  std::uint64_t expert_slot_bytes = 0;  ///< one expert's six tensors, 4096-aligned stride
  std::uint64_t experts_total = 0;      ///< routed experts in the model
  std::uint64_t expert_slots = 0;       ///< arena slots (every expert when resident)
  std::uint64_t min_expert_slots = 0;   ///< top-k: one token's working set for a layer

  // Model tables, state, buffers.
  bool stream_embedding = false;
  std::uint64_t embedding_bytes = 0;     ///< the table when resident, else row buffers
  std::uint64_t lm_head_bytes = 0;       ///< the head when resident, else the row-chunk buffers
  std::uint64_t lm_head_chunk_rows = 0;  ///< rows per chunk; 0 = resident
  std::uint64_t kda_state_bytes = 0;
  std::uint64_t mla_kv_bytes = 0;
  /// Speculative verification: what a tentative chunk of 1 + max_draft tokens records per
  /// KDA layer to keep only a prefix (maths/tentative.hpp), one layer's scratch state, and
  /// the logits of every checked position.
  std::uint64_t speculative_bytes = 0;
  /// The router lookahead's resident copies of the streamed MoE layers' routers
  /// (PlanInputs::router_copy): bits a weight (8, 4; 0 = none), how many, their bytes.
  int router_copy_bits = 0;
  std::size_t router_copies = 0;
  std::uint64_t router_copy_bytes = 0;
  bool router_copy_auto = false;  ///< chosen by the plan (cache.prefetch.router auto)
  /// Sequences decoded together (PlanInputs::parallel, auto resolved); the KDA state, MLA
  /// KV and speculative figures above are for all of them.
  std::size_t parallel = 1;
  bool parallel_auto = false;        ///< chosen by the plan (serve.parallel 0)
  std::uint64_t sequence_bytes = 0;  ///< one sequence's KDA state, MLA KV and journals
  std::uint64_t prefill_budget = 0;  ///< prompt tokens per step of several sequences
  std::uint64_t step_rows = 0;       ///< the tokens one forward pass holds at most
  RunBufferSizes buffers;            ///< for passes of step_rows tokens
  std::uint64_t buffer_bytes = 0;    ///< the run buffers, plus logits and their copy
  std::uint64_t overhead_bytes = 0;  ///< tensor index and plugin code (estimate)
  std::int64_t context = 0;

  std::uint64_t total = 0;

  /// Pinned layers, ring slots and the row-chunk buffers of split FFNs (unless the streamed
  /// lm_head already holds them: they are shared).
  [[nodiscard]] std::uint64_t trunk_bytes() const {
    const bool chunks_here = split_layers != 0 && lm_head_chunk_rows == 0;
    return pinned_bytes + ring_slots * ring_slot_bytes + (chunks_here ? row_chunk_buffers * row_chunk_bytes : 0);
  }
  [[nodiscard]] std::uint64_t expert_bytes() const { return expert_slots * expert_slot_bytes; }
  [[nodiscard]] bool streams_trunk() const { return pinned_count < last_layer - first_layer; }
  [[nodiscard]] bool holds_layer(std::size_t layer) const { return layer >= first_layer && layer < last_layer; }
  /// The embedding table (the first rank) and the final norm and lm_head (the last).
  [[nodiscard]] bool holds_embedding() const { return first_layer == 0; }
  [[nodiscard]] bool holds_head() const { return last_layer == layer_bytes.size(); }
  [[nodiscard]] bool streams_experts() const { return expert_slots < experts_total; }
  /// Everything fits resident: the plain in-memory source serves the model.
  [[nodiscard]] bool resident() const { return !streams_trunk() && !streams_experts() && !stream_embedding; }
  [[nodiscard]] bool fits() const { return total <= available; }
  /// The printed plan: one line per item, the total and the available memory.
  [[nodiscard]] std::string table() const;
  /// One sentence: whether this run holds the whole model in memory or streams, and what.
  [[nodiscard]] std::string summary() const;
};

/// Sizes everything from the geometry (no weights needed). UsageError for a budget that
/// cannot hold the minimum (one ring slot is always planned; expert slots never below top-k).
MemoryPlan plan_memory(const ModelConfig& config, const PlanInputs& inputs);

/// Throws k3::Error(ExitCode::resource) naming the total, the available memory and the
/// shortfall when the plan does not fit.
void require_fit(const MemoryPlan& plan);

}  // namespace k3
