// Several sessions fed in one forward pass (docs/architecture.md, "The step scheduler"):
// every weight of the trunk and every routed expert a pass needs is read once for all of
// them, which is what a streamed model pays for.
//
//   k3::BatchForward pass(model, /*rows=*/64, /*positions=*/4096, /*sequences=*/8);
//   std::vector<k3::BatchFeed> feeds = {{&a, a_tokens}, {&b, b_tokens, true, true}};
//   pass.run(feeds, logits);   // a's last row, then every row of b
//   b.keep_tentative(kept);    // a tentative feed keeps a prefix afterwards
//
// Exactness: a session's logits bits and the state it is left in are the same whatever
// else shares the pass, and the same as Session::feed alone (docs/model-spec.md §5: every
// row of a matrix product is reduced in one fixed order whatever the batch; KDA and MLA see
// only the session's own state).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <k3/model.hpp>

namespace k3 {

/// One session's part of a pass.
struct BatchFeed {
  Session* session = nullptr;
  std::span<const std::uint32_t> tokens;  ///< fed after everything the session holds
  bool all_positions = false;             ///< logits of every token, else of the last (every: tentative)
  /// Speculative verification: the session keeps only a prefix of the tokens afterwards
  /// (Session::keep_tentative, which must follow before it is used again).
  bool tentative = false;
};

/// One sequence's part of a pass as it travels to the later ranks of a model split over
/// ranks (k3/cluster.hpp).
struct LinkedSlice {
  std::uint64_t sequence = 0;  ///< which sequence (its session, as rank 0 names it)
  std::int64_t position = 0;   ///< its position before the pass
  std::uint32_t rows = 0;      ///< its tokens in the pass
  bool all_positions = false;  ///< logits of every row, else of its last
  bool tentative = false;      ///< speculative verification: a prefix is kept afterwards
};

/// The ranks after this one, as rank 0's passes see them: `activations` (prefix [rows, E],
/// then `banked` AttnRes snapshots) after rank 0's layers in, the last rank's logits out
/// (`logits`, as BatchForward::run writes them). Several passes may be in flight at once,
/// each on another rank: their logits come back in the order they started.
class PassLink {
 public:
  virtual ~PassLink() = default;
  /// The passes worth keeping in flight at once (the ranks: one working on each).
  [[nodiscard]] virtual std::size_t stages() const noexcept = 0;
  /// Hands a pass to the next rank and returns at once with its number.
  virtual std::uint64_t start(std::span<const LinkedSlice> slices, std::span<const std::uint32_t> tokens,
                              std::span<const float> activations, std::size_t banked) = 0;
  /// Waits for the logits of `pass`, which must be the oldest started and not finished;
  /// the pass is over even when this throws (the error a later rank reported, a deadline).
  virtual void finish(std::uint64_t pass, std::vector<float>& logits) = 0;
  /// One pass, waited for.
  void forward(std::span<const LinkedSlice> slices, std::span<const std::uint32_t> tokens,
               std::span<const float> activations, std::size_t banked, std::vector<float>& logits) {
    finish(start(slices, tokens, activations, banked), logits);
  }
};

class BatchForward {
 public:
  /// Run buffers for passes of up to `rows` tokens in all over sessions of up to
  /// `positions` positions, allocated here once (the memory plan counts them, k3/plan.hpp);
  /// `sequences`: the most feeds one pass holds (room reserved, so that a pass allocates
  /// nothing).
  BatchForward(Model& model, std::size_t rows, std::int64_t positions, std::size_t sequences);
  ~BatchForward();
  BatchForward(const BatchForward&) = delete;
  BatchForward& operator=(const BatchForward&) = delete;

  /// One forward pass over every feed's tokens. `logits` receives, feed after feed, [n, V]
  /// rows for a feed with all_positions (n its tokens), else [1, V]. UsageError before any
  /// compute for a feed its session refuses (no tokens, an id outside the vocabulary, more
  /// than its context holds); RuntimeError for a session that is twice in the pass, of
  /// another model, or waiting for keep_tentative(). A pass longer than `rows` (a caller
  /// feeding a whole prompt at once) grows the buffers, kept for later passes. If the pass
  /// throws, every tentative feed keeps nothing; the other sessions hold part of a pass
  /// (as after a Session::feed that threw).
  void run(std::span<const BatchFeed> feeds, std::vector<float>& logits);

  /// A rank's share of a pass when the model is split over ranks (docs/cluster.md): the
  /// layers its Model holds (MemoryPlan::first_layer, last_layer), with run()'s checks and
  /// its handling of tentative feeds. `in`: the activations the previous rank sent
  /// (prefix [rows, E], then `in_banked` AttnRes block snapshots [rows, E] each), empty on
  /// the first rank, which embeds the tokens instead. `out`: on the last rank the logits, as
  /// run() writes them; on the others the activations for the next rank in the same layout,
  /// with `out_banked` snapshots. Plain fp32 rows: sent as bytes, the next rank computes
  /// exactly what one process would.
  void run_stage(std::span<const BatchFeed> feeds, std::span<const float> in, std::size_t in_banked,
                 std::vector<float>& out, std::size_t& out_banked);

  /// Rank 0 of a model split over ranks (Model::set_pass_link): run() in two halves, so that
  /// several passes are in flight at once, each on another rank. launch() runs this rank's
  /// layers over `feeds` and hands the pass on, returning its number at once; collect()
  /// waits for the logits of the oldest pass launched (`pass`), as run() writes them. The
  /// sessions of a pass in flight are fed nothing else until it is collected. If collect()
  /// throws, every tentative feed of its pass keeps nothing. RuntimeError on a whole model.
  std::uint64_t launch(std::span<const BatchFeed> feeds);
  void collect(std::uint64_t pass, std::vector<float>& logits);
  /// The passes worth keeping in flight: the link's stages, 1 on a whole model.
  [[nodiscard]] std::size_t stages() const noexcept;

  /// The rows one pass holds without growing.
  [[nodiscard]] std::size_t rows() const noexcept;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace k3
