// One forward pass over a batch of sequences (docs/model-spec.md §3 "Decoder layer i" and
// "End"), in calls split where a pipeline stage would end (docs/architecture.md, "The step
// scheduler"): begin_pass (checks and the embedding), run_layers (a range of decoder
// layers), end_pass (output AttnRes, final norm, lm_head), then finish_pass (every state
// moves past its tokens). A process that holds every layer runs them in order
// (forward_pass); a pipeline rank owning layers [a, b) would run only its range and hand
// the Activations, plain fp32 rows, to the next rank.
//
// The rows of a pass are the slices' tokens concatenated (maths/blocks/blocks.hpp SeqSlice):
// every token-parallel part (embedding, AttnRes, norms, dense products, router, routed
// experts, lm_head) runs once over all rows, reading each weight once; KDA and MLA walk each
// slice on its own state. A sequence's logits bits are therefore the same alone or beside
// any others (tests/unit/model/batch_pass_test.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "maths/blocks/blocks.hpp"
#include "maths/forward.hpp"

namespace k3::maths {

/// What crosses a stage boundary: the running prefix P of every row and the AttnRes block
/// snapshots taken so far, views into the run buffers (stack.prefix, stack.bank). A
/// transport would send prefix, then bank's first banked·rows·E floats, and `banked`.
struct Activations {
  std::size_t rows = 0;     ///< T: every slice's tokens
  std::size_t banked = 0;   ///< block snapshots taken (one at each layer i with i % block == 0)
  std::span<float> prefix;  ///< [rows, E]
  std::span<float> bank;    ///< [banked, rows, E] once layers ran (room for every block)
};

/// Checks the pass (rows within the run buffers, each slice's positions within them,
/// distinct states, ids within the vocabulary) and embeds every row: P = the embedding
/// rows, nothing banked. `tokens` are the rows' ids, slices in order (their rows add up to
/// tokens.size()). UsageError for an id outside the vocabulary, RuntimeError otherwise.
Activations begin_pass(ForwardContext& ctx, std::span<const SeqSlice> slices, std::span<const std::uint32_t> tokens);

/// The Activations of a stage that does not begin the pass (a rank owning layers [first,
/// …) of a model split over ranks): the checks of begin_pass, then P and the `banked`
/// snapshots copied from `in` (prefix [rows, E], then bank [banked, rows, E]: what the
/// previous stage's Activations hold). RuntimeError when `in` is not that size or `banked`
/// is not the snapshots layers [0, first) take.
Activations resume_pass(ForwardContext& ctx, std::span<const SeqSlice> slices, std::span<const std::uint32_t> tokens,
                        std::size_t first, std::span<const float> in, std::size_t banked);

/// The AttnRes block snapshots taken before layer `layer`: one at each i < layer with
/// i % block == 0.
[[nodiscard]] std::size_t banked_before(const ModelConfig& config, std::size_t layer) noexcept;

/// Decoder layers [first, last) over every row of `act`; each slice's KDA and MLA state of
/// those layers takes its tokens (a tentative slice records instead, maths/tentative.hpp).
void run_layers(ForwardContext& ctx, std::size_t first, std::size_t last, std::span<const SeqSlice> slices,
                Activations& act);

/// The logits of each slice, slices in order: [rows, V] for a slice with all_positions,
/// else [1, V] for its last row. Returns the rows written (logit_rows(slices)).
std::size_t end_pass(ForwardContext& ctx, std::span<const SeqSlice> slices, const Activations& act, float* logits);

/// Every slice's state moves past its tokens (position, token history). After the last
/// layer of a pass; in a pipeline every stage calls it for the states it holds.
void finish_pass(std::span<const SeqSlice> slices, std::span<const std::uint32_t> tokens);

/// One stage holding every layer: begin_pass, run_layers over all of them, end_pass,
/// finish_pass.
void forward_pass(ForwardContext& ctx, std::span<const SeqSlice> slices, std::span<const std::uint32_t> tokens,
                  float* logits);

/// The rows of logits a pass over `slices` writes: Σ (all_positions ? rows : 1).
[[nodiscard]] std::size_t logit_rows(std::span<const SeqSlice> slices) noexcept;

}  // namespace k3::maths
