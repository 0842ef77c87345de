// The memory plan: sizes from the geometry, pinning largest-first, ring and expert slots.
// Byte figures mirror what the streaming sources allocate (core/src/runtime/streamed_*.cpp):
// a tensor group is read into one buffer with every tensor 64-byte aligned, and the small
// BF16 vectors are widened to fp32 next to it. Sized from the release dtypes, except that a
// vector is counted as BF16 plus its fp32 widening (the most any accepted dtype costs), so
// the plan holds for the release and compact mixes alike.
#include <k3/plan.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>

#include <k3/error.hpp>
#include <k3/geometry.hpp>
#include <k3/machine.hpp>
#include <k3/pipeline.hpp>
#include <k3/units.hpp>

namespace k3 {
namespace {

using U = std::uint64_t;

constexpr U kTensorAlign = 64;               // TensorReader places tensors 64-byte aligned
constexpr U kSlotAlign = 4096;               // slot strides stay O_DIRECT friendly
constexpr U kHeadChunkBytes = 32ull << 20;   // row chunk (lm_head, split FFN) unless memory.row_chunk_mb
constexpr U kPluginCodeBytes = 16ull << 20;  // kernels, storage, cache and tokenizer code
constexpr U kIndexBytesPerTensor = 256;      // TensorInfo + name + lookup slot
constexpr double kFitShare = 0.9;            // "fit" leaves a tenth of the available memory alone

U align_up(U v, U a) { return (v + a - 1) / a * a; }

/// Bytes of one group as the sources hold it: the aligned tensor bytes plus the fp32 copies
/// of BF16 vectors (norms, AttnRes vectors, biases), which are widened on binding. An F32
/// vector is used in place (4 bytes an element); a BF16 one costs 2 + 4, the larger.
U held_bytes(const TensorGroup& g) {
  U n = 0;
  for (const auto& t : g.tensors) {
    if (!t.vector) {
      n = align_up(n, kTensorAlign) + t.nbytes();
      continue;
    }
    const U elements = t.nbytes() / element_size(t.dtype);
    n = align_up(n, kTensorAlign) + elements * element_size(DType::bf16);
    if (t.dtypes.has(DType::bf16)) n += elements * element_size(DType::f32);
  }
  return n;
}

/// What a plan needs of the tensor table: each layer's bytes whole and without its dense
/// FFN, one expert's slot, the tensor count. Walking the table costs ~0.3 s for K3 (half a
/// million tensor names), and `k3host doctor` plans K3 once per preset, so the sizes are
/// kept per architecture (the fingerprint covers every config field) for the process.
struct GeometrySizes {
  std::vector<U> layer_bytes, layer_core_bytes;
  U expert_slot_bytes = 0;
  U tensors = 0;
};

const GeometrySizes& geometry_sizes(const ModelConfig& c) {
  static std::mutex mutex;
  static std::map<std::uint64_t, GeometrySizes> known;
  const std::uint64_t key = c.fingerprint();
  {
    const std::lock_guard lock(mutex);
    if (const auto it = known.find(key); it != known.end()) return it->second;
  }
  GeometrySizes g;
  const auto layers = static_cast<std::size_t>(c.num_hidden_layers);
  g.layer_bytes.assign(layers, 0);
  g.layer_core_bytes.assign(layers, 0);
  bool have_expert = false;
  for_each_tensor_group(c, [&](TensorGroup&& group) {
    if (group.kind == TensorGroup::Kind::layer_trunk) {
      const auto li = static_cast<std::size_t>(group.layer);
      g.layer_bytes[li] = held_bytes(group);
      std::erase_if(group.tensors, [](const TensorSpec& t) { return t.part == TensorPart::dense_ffn; });
      g.layer_core_bytes[li] = held_bytes(group);
    }
    if (group.kind == TensorGroup::Kind::routed_expert && !have_expert) {
      g.expert_slot_bytes = align_up(held_bytes(group), kSlotAlign);
      have_expert = true;
    }
  });
  g.tensors = geometry_census(c).tensors;
  const std::lock_guard lock(mutex);
  return known.try_emplace(key, std::move(g)).first->second;  // std::map: references stay valid
}

U gb_to_bytes(double gb) { return static_cast<U>(std::floor(gb * 1e9)); }

std::string gb(U bytes) { return format_bytes(bytes); }

/// Pins layers largest first (ties: lower index) into what the ring leaves of the budget,
/// iterating to a fixed point: pinning the largest layers shrinks the ring slot, which
/// frees budget for more pins (reference engine §5.3). A pinned layer costs its whole size;
/// a ring slot holds the largest unpinned layer's `slot_of` (its core when split). `extra`
/// is what streaming costs besides the ring (row-chunk buffers of split FFNs).
void choose_pins(MemoryPlan& p, U budget, const std::vector<U>& slot_of, U extra) {
  const std::size_t n = p.layer_bytes.size();
  const std::size_t held = p.last_layer - p.first_layer;  // the others are another rank's
  const U all = std::accumulate(p.layer_bytes.begin(), p.layer_bytes.end(), U{0});
  p.pinned.assign(n, false);
  p.pinned_count = 0;
  p.pinned_bytes = 0;
  if (all <= budget) {
    for (std::size_t li = p.first_layer; li < p.last_layer; ++li) p.pinned[li] = true;
    p.pinned_count = held;
    p.pinned_bytes = all;
    p.ring_slots = 0;
    p.ring_slot_bytes = 0;
    p.streamed_trunk_bytes = 0;
    return;
  }
  std::vector<std::size_t> order(held);
  std::iota(order.begin(), order.end(), p.first_layer);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return p.layer_bytes[a] > p.layer_bytes[b]; });
  constexpr std::size_t kRingWant = 2;  // one layer computing, one being read ahead
  const U room = budget > extra ? budget - extra : 0;
  U slot = *std::max_element(slot_of.begin(), slot_of.end());
  for (int pass = 0; pass < 8; ++pass) {
    std::size_t ring = kRingWant;
    while (ring > 1 && ring * slot > room) --ring;
    U spent = ring * slot;
    std::vector<bool> pin(n, false);
    std::size_t count = 0;
    U pinned_bytes = 0;
    for (std::size_t li : order) {
      // Never pin everything: the ring exists because something streams.
      if (count + 1 == held) break;
      if (spent + p.layer_bytes[li] <= room) {
        pin[li] = true;
        spent += p.layer_bytes[li];
        pinned_bytes += p.layer_bytes[li];
        ++count;
      }
    }
    U next_slot = 0;
    for (std::size_t li = p.first_layer; li < p.last_layer; ++li)
      if (!pin[li]) next_slot = std::max(next_slot, slot_of[li]);
    const bool stable = next_slot == slot && count == p.pinned_count && pass > 0;
    p.pinned = pin;
    p.pinned_count = count;
    p.pinned_bytes = pinned_bytes;
    p.ring_slots = ring;
    p.ring_slot_bytes = next_slot;
    if (stable) break;
    slot = next_slot;
  }
  // A slot shrunk in the last pass may allow a deeper ring.
  while (p.ring_slots < kRingWant && p.pinned_bytes + (p.ring_slots + 1) * p.ring_slot_bytes <= room) ++p.ring_slots;
  p.streamed_trunk_bytes = all - p.pinned_bytes;
}

/// Pins with the dense FFNs whole or split, as asked; automatic keeps the split only when it
/// streams fewer trunk bytes per token (more pinned), or as many with a read-ahead slot the
/// whole layer left no room for, or as many with less memory.
void plan_trunk(MemoryPlan& p, U budget, PlanInputs::SplitDenseFfn mode, U chunk_buffers) {
  const std::size_t n = p.layer_bytes.size();
  auto split_count = [&](const MemoryPlan& q) {
    std::size_t k = 0;
    for (std::size_t li = 0; li < n; ++li) k += !q.pinned[li] && q.layer_core_bytes[li] != q.layer_bytes[li] ? 1 : 0;
    return k;
  };
  MemoryPlan whole = p;
  choose_pins(whole, budget, p.layer_bytes, 0);
  whole.split_dense_ffn = false;
  whole.split_layers = 0;
  const bool has_dense = p.layer_core_bytes != p.layer_bytes;
  if (mode == PlanInputs::SplitDenseFfn::off || !has_dense) {
    p = std::move(whole);
    return;
  }
  MemoryPlan split = p;
  choose_pins(split, budget, p.layer_core_bytes, chunk_buffers);
  split.split_layers = split_count(split);
  split.split_dense_ffn = split.split_layers != 0;
  if (!split.split_dense_ffn) {  // every dense layer pinned: nothing to split
    p = std::move(whole);
    return;
  }
  // Fewer bytes streamed per token first; then a read-ahead slot (reads overlap compute);
  // then less memory.
  const U ss = split.streamed_trunk_bytes, ws = whole.streamed_trunk_bytes;
  const bool split_overlaps = split.ring_slots > whole.ring_slots;
  const bool better = ss < ws || (ss == ws && (split_overlaps || (split.ring_slots == whole.ring_slots &&
                                                                  split.trunk_bytes() < whole.trunk_bytes())));
  p = std::move(mode == PlanInputs::SplitDenseFfn::on || better ? split : whole);
}

}  // namespace

PlanInputs plan_inputs(const Pipeline& p) {
  PlanInputs in;
  in.trunk_gb = p.get_budget("memory.trunk_gb");
  in.expert_cache_gb = p.get_budget("memory.expert_cache_gb");
  in.stream_embedding = p.get_bool("memory.stream_embedding");
  const std::string split = p.get_string("memory.split_dense_ffn");
  in.split_dense_ffn = split == "on"    ? PlanInputs::SplitDenseFfn::on
                       : split == "off" ? PlanInputs::SplitDenseFfn::off
                                        : PlanInputs::SplitDenseFfn::automatic;
  in.context = p.get_int("memory.context");
  in.row_chunk_bytes = static_cast<std::uint64_t>(std::llround(p.get_double("memory.row_chunk_mb") * 1e6));
  in.prefill_chunk = p.get_int("job.prefill_chunk");
  in.threads = machine::compute_threads(p.get_int("threads"));
  in.speculative_draft = p.get_string("job.mode") == "incremental" ? p.get_int("job.speculative.max_draft") : 0;
  const std::string budgets_for = p.get_string("memory.budgets_for");
  if (budgets_for != "model") in.budgets_for = budgets_of(budgets_for);
  const std::string router = p.get_string("cache.prefetch.router");
  in.router_copy = router == "exact"  ? PlanInputs::RouterCopy::exact
                   : router == "int8" ? PlanInputs::RouterCopy::int8
                   : router == "int4" ? PlanInputs::RouterCopy::int4
                                      : PlanInputs::RouterCopy::automatic;
  in.lookahead = p.get_int("cache.prefetch.depth") > 0;
  return in;
}

PlanInputs batched_plan_inputs(const Pipeline& p) {
  PlanInputs in = plan_inputs(p);
  in.parallel = p.get_int("serve.parallel");
  in.prefill_budget = p.get_int("serve.prefill_budget");
  return in;
}

PlanInputs::BudgetsFor budgets_of(const std::string& geometry) {
  const ModelConfig c = load_geometry(geometry).config;
  const GeometrySizes& g = geometry_sizes(c);
  const U experts = static_cast<U>(c.num_experts) * static_cast<U>(c.num_hidden_layers - c.first_k_dense_replace);
  return {geometry, std::accumulate(g.layer_bytes.begin(), g.layer_bytes.end(), U{0}), experts * g.expert_slot_bytes};
}

namespace {

/// The router lookahead's copies (PlanInputs::router_copy): one for each MoE layer the plan
/// streams (a pinned layer's exact router is always at hand), sized by maths/router_copy.hpp.
void plan_router_copies(MemoryPlan& p, const ModelConfig& c, const PlanInputs& in, U rest) {
  p.router_copy_bits = 0;
  p.router_copies = 0;
  p.router_copy_bytes = 0;
  p.router_copy_auto = in.router_copy == PlanInputs::RouterCopy::automatic;
  if (!in.lookahead || in.router_copy == PlanInputs::RouterCopy::exact) return;
  std::size_t streamed_moe = 0;
  for (std::size_t li = p.first_layer; li < p.last_layer; ++li)
    if (!p.pinned[li] && !c.is_dense(static_cast<std::int64_t>(li))) ++streamed_moe;
  if (streamed_moe == 0) return;
  const auto bytes = [&](int bits) {
    return streamed_moe * router_copy_bytes(static_cast<U>(c.num_experts), static_cast<U>(c.hidden_size), bits);
  };
  int bits = in.router_copy == PlanInputs::RouterCopy::int8   ? 8
             : in.router_copy == PlanInputs::RouterCopy::int4 ? 4
                                                              : 0;
  if (p.router_copy_auto) {
    const auto room = static_cast<U>(static_cast<double>(rest) * kRouterCopyShare);
    bits = bytes(8) <= room ? 8 : bytes(4) <= room ? 4 : 0;
  }
  if (bits == 0) return;
  p.router_copy_bits = bits;
  p.router_copies = streamed_moe;
  p.router_copy_bytes = bytes(bits);
}

/// Takes the geometry's layer and expert sizes, keeping only the layers this rank holds (a
/// rank of a split model holds its range; the others cost it nothing), and counts the experts
/// of the held MoE layers. Apart so that plan_for reads as its steps.
void hold_layers(MemoryPlan& p, const ModelConfig& c, const PlanInputs& in, const GeometrySizes& sizes) {
  const auto layers = static_cast<std::size_t>(c.num_hidden_layers);
  p.layer_bytes = sizes.layer_bytes;
  p.layer_core_bytes = sizes.layer_core_bytes;
  p.expert_slot_bytes = sizes.expert_slot_bytes;
  p.first_layer = std::min(in.first_layer, layers);
  p.last_layer = in.last_layer == 0 ? layers : std::min(in.last_layer, layers);
  if (p.first_layer >= p.last_layer) throw UsageError("a rank's range of layers is empty");
  U moe_layers = 0;
  for (std::size_t li = 0; li < layers; ++li) {
    if (p.holds_layer(li)) {
      moe_layers += c.is_dense(static_cast<std::int64_t>(li)) ? 0 : 1;
      continue;
    }
    p.layer_bytes[li] = 0;
    p.layer_core_bytes[li] = 0;
  }
  p.experts_total = static_cast<U>(c.num_experts) * moe_layers;
  p.min_expert_slots = std::min<U>(static_cast<U>(c.num_experts_per_token), p.experts_total);
}

/// Sizes what grows with the sequences and the tokens of a pass: the step's rows, each
/// sequence's KDA state, MLA latents and verification journal, and the run buffers. Apart
/// because none of it depends on the budgets the rest of the plan shares out.
void size_sequences(MemoryPlan& p, const ModelConfig& c, const PlanInputs& in, std::uint64_t parallel) {
  const U V = static_cast<U>(c.vocab_size);
  const auto checked = std::max<std::int64_t>(0, in.speculative_draft) + 1;  // a token and its drafts
  // The tokens one pass holds. One sequence: a prefill chunk or a token and its drafts.
  // Several: every decoding sequence's token and drafts, or all but one of them beside the
  // step's prefill budget (k3/scheduler.hpp step_rows).
  const U N = parallel;
  p.parallel = static_cast<std::size_t>(N);
  p.prefill_budget =
      static_cast<U>(std::max<std::int64_t>(1, in.prefill_budget > 0 ? in.prefill_budget : in.prefill_chunk));
  const U C = static_cast<U>(checked);
  const U T = N == 1
                  ? static_cast<U>(std::max<std::int64_t>(1, std::min(std::max(in.prefill_chunk, checked), in.context)))
                  : std::max(N * C, (N - 1) * C + p.prefill_budget);
  p.step_rows = T;

  // State: KDA recurrent state and conv tails per KDA layer; MLA latent per position.
  const U H = static_cast<U>(c.kda_num_heads), D = static_cast<U>(c.kda_head_dim);
  const U K = static_cast<U>(c.short_conv_kernel_size), P = H * D;
  U n_mla = 0;
  for (std::size_t li = p.first_layer; li < p.last_layer; ++li)
    n_mla += c.is_mla(static_cast<std::int64_t>(li)) ? 1 : 0;
  const U n_kda = (p.last_layer - p.first_layer) - n_mla;
  // Each sequence holds its own; the figures are for all of them.
  const U kda_one = n_kda * (H * D * D + 3 * P * (K - 1)) * 4;
  const U mla_one = n_mla * static_cast<U>(in.context) * static_cast<U>(c.kv_lora_rank + c.qk_rope_head_dim) * 4;
  U journal_one = 0;
  if (in.speculative_draft > 0) {
    // Per KDA layer and checked token: q, k, v conv inputs, α (f64), normalised k, u and β (f64);
    // and one layer's scratch state.
    journal_one = n_kda * C * (P * (3 * 4 + 8 + 4 + 4) + H * 8) + (H * D * D + 3 * P * (K - 1)) * 4;
    // One sequence's checked positions' logits; several sequences' are the step's (below).
    p.speculative_bytes = N * journal_one + (N == 1 ? C * V * 4 : 0);
  }
  p.kda_state_bytes = N * kda_one;
  p.mla_kv_bytes = N * mla_one;
  p.sequence_bytes = kda_one + mla_one + journal_one;

  // Activations for one pass of T tokens: the run buffers every block works in
  // (plan_buffers.cpp), allocated once, plus the logits: one sequence's last row and the
  // generator's copy, or every row of a step of several sequences and a copy.
  p.buffers = run_buffer_sizes(c, static_cast<std::int64_t>(T), in.context, in.threads);
  p.buffer_bytes = p.buffers.bytes() + (N == 1 ? 2 : T + 1) * V * 4;
}

/// The bytes of the embedding and lm_head tables. Tables: resident when everything is;
/// otherwise an embedding row per token is read on demand (a token needs one row of the
/// table), and lm_head stays resident unless stream_embedding asks for it in row chunks.
/// A rank of a split model holds the embedding only when it is the first, lm_head only
/// when it is the last. Called twice (before and after the trunk is planned), hence apart.
void size_tables(MemoryPlan& p, const ModelConfig& c, bool stream_embedding, bool resident_model) {
  const U E = static_cast<U>(c.hidden_size), V = static_cast<U>(c.vocab_size);
  const U T = p.step_rows;
  const U table = V * E * 2;
  if (resident_model) {
    p.embedding_bytes = table;
    p.lm_head_bytes = table;
    p.lm_head_chunk_rows = 0;
  } else {
    p.embedding_bytes = T * E * 2;
    if (stream_embedding) {
      p.lm_head_chunk_rows = std::max<U>(1, std::min<U>(V, p.row_chunk_bytes / (E * 2)));
      p.lm_head_bytes = p.row_chunk_buffers * p.row_chunk_bytes + p.lm_head_chunk_rows * T * 4;
    } else {
      p.lm_head_bytes = table;
      p.lm_head_chunk_rows = 0;
    }
  }
  if (!p.holds_embedding()) p.embedding_bytes = 0;
  if (!p.holds_head()) {
    p.lm_head_bytes = 0;
    p.lm_head_chunk_rows = 0;
  }
}

/// Sets the trunk and expert budgets, given or "fit", and sizes the tables for them (the
/// fixed costs "fit" subtracts include the tables). Apart: the budget rules are one topic.
void set_budgets(MemoryPlan& p, const ModelConfig& c, const PlanInputs& in) {
  const U trunk_all = std::accumulate(p.layer_bytes.begin(), p.layer_bytes.end(), U{0});
  const U experts_all = p.experts_total * p.expert_slot_bytes;
  // memory.budgets_for: budgets written for a larger model are scaled by this one's share of
  // it, trunk and experts each (never up); the plan's floors (a ring slot, top-k experts)
  // still hold below.
  if (in.budgets_for) {
    p.budgets_for = in.budgets_for->name;
    auto share = [](U mine, U theirs) {
      return theirs == 0 ? 1.0 : std::min(1.0, static_cast<double>(mine) / static_cast<double>(theirs));
    };
    p.trunk_scale = share(trunk_all, in.budgets_for->trunk_bytes);
    p.expert_scale = share(experts_all, in.budgets_for->expert_bytes);
  }
  const auto trunk_given = [&] {
    return static_cast<U>(std::floor(static_cast<double>(gb_to_bytes(*in.trunk_gb)) * p.trunk_scale));
  };
  const auto experts_given = [&] {
    return static_cast<U>(std::floor(static_cast<double>(gb_to_bytes(*in.expert_cache_gb)) * p.expert_scale));
  };
  const bool budgets_hold_all = in.trunk_gb && in.expert_cache_gb && trunk_given() >= trunk_all &&
                                experts_given() >= experts_all;

  // "fit": usable = 90% of the available memory minus everything but the two budgets;
  // the trunk takes what it can first (a GB of pinned trunk removes more guaranteed traffic
  // than a GB of expert cache, reference engine §5.6), the cache gets the rest.
  p.trunk_fit = !in.trunk_gb;
  p.expert_fit = !in.expert_cache_gb;
  size_tables(p, c, in.stream_embedding, budgets_hold_all && !in.stream_embedding);
  const U fixed = p.embedding_bytes + p.lm_head_bytes + p.kda_state_bytes + p.mla_kv_bytes + p.speculative_bytes +
                  p.buffer_bytes + p.overhead_bytes;
  const U share = static_cast<U>(static_cast<double>(p.available) * kFitShare);
  const U usable = share > fixed ? share - fixed : 0;
  const U min_cache = 2 * p.min_expert_slots * p.expert_slot_bytes;
  if (p.trunk_fit && p.expert_fit) {
    p.trunk_budget = std::min(trunk_all, usable > min_cache ? usable - min_cache : 0);
    p.expert_budget = usable > p.trunk_budget ? usable - p.trunk_budget : 0;
  } else if (p.trunk_fit) {
    p.expert_budget = experts_given();
    p.trunk_budget = usable > p.expert_budget ? usable - p.expert_budget : 0;
  } else if (p.expert_fit) {
    p.trunk_budget = trunk_given();
    p.expert_budget = usable > p.trunk_budget ? usable - p.trunk_budget : 0;
  } else {
    p.trunk_budget = trunk_given();
    p.expert_budget = experts_given();
  }
}

/// The plan for `parallel` sequences (>= 1) against `available` bytes.
MemoryPlan plan_for(const ModelConfig& c, const PlanInputs& in, std::uint64_t parallel, std::uint64_t available,
                    const std::string& available_source) {
  MemoryPlan p;
  p.available = available;
  p.available_source = available_source;
  p.context = in.context;
  p.stream_embedding = in.stream_embedding;

  const GeometrySizes& sizes = geometry_sizes(c);
  hold_layers(p, c, in, sizes);
  size_sequences(p, c, in, parallel);
  p.overhead_bytes = kPluginCodeBytes + sizes.tensors * kIndexBytesPerTensor;

  // Row chunks (lm_head in ultra, split dense FFNs): two buffers, one being read while the
  // other is multiplied, each sized for the longest row of what they serve.
  const U chunk_target = in.row_chunk_bytes != 0 ? in.row_chunk_bytes : kHeadChunkBytes;
  p.row_chunk_bytes = chunk_target;
  p.row_chunk_buffers = 2;
  set_budgets(p, c, in);

  {
    // A split FFN's rows are intermediate_size bf16 at most (down_proj); its output rows
    // for one chunk go through a T x rows buffer.
    const U E = static_cast<U>(c.hidden_size);
    const U DI2 = static_cast<U>(c.intermediate_size) * 2;
    p.row_chunk_bytes = std::max({chunk_target, DI2, E * 2});
    const U chunk_buffers = in.stream_embedding ? 0 : p.row_chunk_buffers * p.row_chunk_bytes;
    plan_trunk(p, p.trunk_budget, in.split_dense_ffn, chunk_buffers);
  }
  p.expert_slots = std::min(p.experts_total, p.expert_slot_bytes ? p.expert_budget / p.expert_slot_bytes : 0);
  p.expert_slots = std::max(p.expert_slots, p.min_expert_slots);
  size_tables(p, c, in.stream_embedding,
              p.resident() || (!p.streams_trunk() && !p.streams_experts() && !in.stream_embedding));

  p.total = p.trunk_bytes() + p.expert_bytes() + p.embedding_bytes + p.lm_head_bytes + p.kda_state_bytes +
            p.mla_kv_bytes + p.speculative_bytes + p.buffer_bytes + p.overhead_bytes;
  plan_router_copies(p, c, in, p.total);
  p.total += p.router_copy_bytes;
  return p;
}

}  // namespace

MemoryPlan plan_memory(const ModelConfig& c, const PlanInputs& in) {
  std::string source = "given";
  const U available = in.available != 0 ? in.available : available_memory(&source);
  if (in.parallel >= 1) return plan_for(c, in, static_cast<U>(in.parallel), available, source);
  // serve.parallel 0: the most sequences, up to kAutoParallel, that fit beside the budgets
  // and take at most a quarter of the memory (with "fit" budgets the plan always fits: the
  // quarter leaves the caches the rest).
  for (U n = static_cast<U>(kAutoParallel); n > 1; --n) {
    MemoryPlan p = plan_for(c, in, n, available, source);
    if (p.fits() && n * p.sequence_bytes <= available / 4) {
      p.parallel_auto = true;
      return p;
    }
  }
  MemoryPlan p = plan_for(c, in, 1, available, source);
  p.parallel_auto = true;
  return p;
}

std::string MemoryPlan::table() const {
  std::string out;
  auto line = [&](const std::string& what, U bytes, const std::string& note) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "  %-18s %12s   %s\n", what.c_str(), gb(bytes).c_str(), note.c_str());
    out += buf;
  };
  auto factor = [](double scale) {
    char b[32];
    std::snprintf(b, sizeof b, "x%.3g", scale);
    return std::string(b);
  };
  // "(budget 3.2 MB: k3's scaled x0.00107)" when memory.budgets_for scaled it.
  auto budget = [&](bool fit, U bytes, double scale) {
    if (fit) return " (budget fit: " + gb(bytes) + ")";
    if (budgets_for.empty() || scale >= 1) return " (budget " + gb(bytes) + ")";
    return " (budget " + gb(bytes) + ": " + budgets_for + "'s scaled " + factor(scale) + ")";
  };
  const std::size_t n = last_layer - first_layer;  // the layers this process holds
  out += "memory plan\n";
  if (n != layer_bytes.size())
    out += "  layers " + std::to_string(first_layer) + "-" + std::to_string(last_layer - 1) + " of " +
           std::to_string(layer_bytes.size()) + " (a rank of a model split over ranks; " +
           (holds_embedding() ? "with the embedding"
            : holds_head()    ? "with the final norm and lm_head"
                              : "no tables") +
           ")\n";
  if (parallel > 1 || parallel_auto)
    out += "  " + std::to_string(parallel) + " sequence" + (parallel == 1 ? "" : "s") +
           " decoded together (serve.parallel" +
           (parallel_auto ? " auto: the most, up to " + std::to_string(kAutoParallel) +
                                ", within a quarter of the available memory"
                          : "") +
           "), " + gb(sequence_bytes) + " of state, KV and journals each\n";
  if (!budgets_for.empty())
    out += "  budgets are " + budgets_for + "'s (memory.budgets_for), scaled to this model: trunk " +
           factor(trunk_scale) + ", experts " + factor(expert_scale) + "\n";
  line("trunk pinned", pinned_bytes,
       std::to_string(pinned_count) + "/" + std::to_string(n) + " layers resident, largest first" +
           budget(trunk_fit, trunk_budget, trunk_scale));
  line("trunk ring", ring_slots * ring_slot_bytes,
       ring_slots == 0 ? "none: every layer pinned"
                       : std::to_string(ring_slots) + " x " + gb(ring_slot_bytes) + " slots for " +
                             std::to_string(n - pinned_count) + " streamed layers" +
                             (ring_slots < 2 ? " (no read-ahead slot: reads are not overlapped)" : ""));
  if (split_layers != 0)
    line("trunk row chunks", lm_head_chunk_rows == 0 ? row_chunk_buffers * row_chunk_bytes : 0,
         std::to_string(split_layers) + " dense FFN" + (split_layers == 1 ? "" : "s") + " read in row chunks, " +
             std::to_string(row_chunk_buffers) + " x " + gb(row_chunk_bytes) +
             (lm_head_chunk_rows != 0 ? " buffers shared with lm_head" : " buffers"));
  line("expert cache", expert_bytes(),
       std::to_string(expert_slots) + " of " + std::to_string(experts_total) + " experts x " + gb(expert_slot_bytes) +
           budget(expert_fit, expert_budget, expert_scale) +
           (expert_slots == min_expert_slots && streams_experts() ? ", raised to top-k" : ""));
  line("embedding", embedding_bytes,
       lm_head_chunk_rows != 0 || streams_trunk() || streams_experts() ? "rows read per token" : "resident");
  line("lm_head", lm_head_bytes,
       lm_head_chunk_rows != 0 ? "streamed in chunks of " + std::to_string(lm_head_chunk_rows) + " rows, " +
                                     std::to_string(row_chunk_buffers) + " x " + gb(row_chunk_bytes) + " buffers"
                               : "resident");
  // Several sequences: each holds its own state, KV and journals.
  const std::string each = parallel > 1 || parallel_auto ? ", " + std::to_string(parallel) + " sequence" +
                                                               (parallel == 1 ? "" : "s") + " decoded together"
                                                         : "";
  line("KDA state", kda_state_bytes, "recurrent state and conv tails" + each);
  line("MLA latent KV", mla_kv_bytes, std::to_string(context) + " positions" + each);
  if (speculative_bytes != 0)
    line("speculative", speculative_bytes, "journals to keep a prefix of a checked token and its drafts" + each);
  if (router_copy_bytes != 0)
    line("router copies", router_copy_bytes,
         std::to_string(router_copies) + " streamed MoE layers' routers at int" + std::to_string(router_copy_bits) +
             ", for the router lookahead (cache.prefetch.router" + (router_copy_auto ? " auto)" : ")"));
  line("buffers", buffer_bytes,
       parallel > 1 ? "run buffers for passes of " + std::to_string(buffers.chunk) +
                          " tokens (each sequence's token "
                          "and drafts, " +
                          std::to_string(prefill_budget) + " prompt tokens per step), logits"
                    : "run buffers for chunks of " + std::to_string(buffers.chunk) + " tokens, logits");
  line("overhead", overhead_bytes, "tensor index and plugin code (estimate)");
  line("TOTAL", total, fits() ? "fits" : "DOES NOT FIT");
  line("available", available, available_source);
  return out;
}

std::string MemoryPlan::summary() const {
  if (resident())
    return "fully resident: the whole model is held in memory (" + gb(total) +
           " planned); every weight is read once at load and nothing is streamed";
  const std::size_t n = last_layer - first_layer;
  std::string s = "streaming: ";
  s += streams_trunk()
           ? std::to_string(pinned_count) + " of " + std::to_string(n) + " trunk layers pinned, the other " +
                 std::to_string(n - pinned_count) + " read from storage every token (" + gb(streamed_trunk_bytes) + ")"
           : "every trunk layer pinned";
  s += streams_experts() ? "; expert cache of " + std::to_string(expert_slots) + " of " +
                               std::to_string(experts_total) + " routed experts, misses read from storage"
                         : "; every routed expert cached";
  if (lm_head_chunk_rows != 0) s += "; lm_head streamed in row chunks";
  if (stream_embedding) s += "; embedding rows read per token";
  return s + " (" + gb(total) + " planned)";
}

void require_fit(const MemoryPlan& p) {
  if (p.fits()) return;
  throw Error(ExitCode::resource, "the memory plan needs " + gb(p.total) + " but " + gb(p.available) +
                                      " is available (" + p.available_source + "), a shortfall of " +
                                      gb(p.total - p.available) + "; lower " +
                                      (p.parallel > 1 ? "serve.parallel (" + std::to_string(p.parallel) +
                                                            " sequences of " + gb(p.sequence_bytes) + " each) / "
                                                      : std::string()) +
                                      "memory.trunk_gb / memory.expert_cache_gb / memory.context, or use a "
                                      "smaller preset");
}

}  // namespace k3
