// Several sessions fed in one forward pass (docs/architecture.md, "The step scheduler"):
// every weight of the trunk and every routed expert a pass needs is read once for all of
// them, which is what a streamed model pays for.
//
//   k3::BatchForward pass(model, /*rows=*/64, /*positions=*/4096, /*sequences=*/8);
//   k3::SamplingSettings greedy;
//   std::vector<k3::BatchFeed> feeds = {{&a, a_tokens}, {&b, b_tokens, true, true, false, &greedy}};
//   k3::PassOutput out;
//   pass.run(feeds, out);      // out.logits: a's last row; out.picks: b's picks, one a row
//   b.keep_tentative(kept);    // a tentative feed keeps a prefix afterwards
//
// Exactness: a session's logits bits, its picks and the state it is left in are the same
// whatever else shares the pass, and the same as Session::feed alone (docs/model-spec.md §5:
// every row of a matrix product is reduced in one fixed order whatever the batch; KDA and
// MLA see only the session's own state; a pick is the Sampler's on those bits).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <k3/model.hpp>
#include <k3/sampler.hpp>

namespace k3 {

/// One session's part of a pass.
struct BatchFeed {
  Session* session = nullptr;
  std::span<const std::uint32_t> tokens;  ///< fed after everything the session holds
  bool all_positions = false;             ///< logits of every token, else of the last (every: tentative)
  /// Speculative verification: the session keeps only a prefix of the tokens afterwards
  /// (Session::keep_tentative, which must follow before it is used again).
  bool tentative = false;
  /// The pass answers a feed with rows: every token's when all_positions or tentative, else
  /// its last token's. `logits`: their logits come back (PassOutput::logits).
  bool logits = true;
  /// When set, the pass picks the next id after each of those rows (PassOutput::picks): the
  /// Sampler's draw with these settings at the position after the row's token, on the
  /// session's ids up to and including it (the repeat penalty's context), exactly what the
  /// caller would draw from the logits. On a model split over ranks the last rank picks and
  /// only the ids travel back. Not owned: it outlives the pass (until collect()).
  const SamplingSettings* pick = nullptr;
};

/// What a pass gives back (BatchForward::run, collect).
struct PassOutput {
  std::vector<float> logits;         ///< feed after feed, the [rows, V] of each feed with `logits`
  std::vector<std::uint32_t> picks;  ///< feed after feed, one per row of each feed with `pick`
};

/// The rows a pass answers `feed` with (its every token's, or its last's).
[[nodiscard]] inline std::size_t answered_rows(const BatchFeed& feed) noexcept {
  return feed.all_positions || feed.tentative ? feed.tokens.size() : 1;
}

/// One sequence's part of a pass as it travels to the later ranks of a model split over
/// ranks (k3/cluster.hpp).
struct LinkedSlice {
  std::uint64_t sequence = 0;  ///< which sequence (its session, as rank 0 names it)
  std::int64_t position = 0;   ///< its position before the pass
  std::uint32_t rows = 0;      ///< its tokens in the pass
  bool all_positions = false;  ///< logits of every row, else of its last
  bool tentative = false;      ///< speculative verification: a prefix is kept afterwards
  bool logits = true;          ///< its rows' logits come back
  bool pick = false;           ///< the last rank picks after each of its rows, by `sampling`
  SamplingSettings sampling;
};

/// The ranks after this one, as rank 0's passes see them: `activations` (prefix [rows, E],
/// then `banked` AttnRes snapshots) after rank 0's layers in, the last rank's answer out
/// (its picks and the logits rows asked for, as BatchForward::run gives them). Several
/// passes may be in flight at once, each on another rank: their answers come back in the
/// order they started.
class PassLink {
 public:
  virtual ~PassLink() = default;
  /// The passes worth keeping in flight at once (the ranks: one working on each).
  [[nodiscard]] virtual std::size_t stages() const noexcept = 0;
  /// Hands a pass to the next rank and returns at once with its number.
  virtual std::uint64_t start(std::span<const LinkedSlice> slices, std::span<const std::uint32_t> tokens,
                              std::span<const float> activations, std::size_t banked) = 0;
  /// Waits for the answer of `pass`, which must be the oldest started and not finished;
  /// the pass is over even when this throws (the error a later rank reported, a deadline).
  virtual void finish(std::uint64_t pass, PassOutput& out) = 0;
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

  /// One forward pass over every feed's tokens. `out` receives, feed after feed, the logits
  /// of the rows each feed is answered with (answered_rows) when it asks for them, and a
  /// pick after each of them when it sets `pick`. UsageError before any
  /// compute for a feed its session refuses (no tokens, an id outside the vocabulary, more
  /// than its context holds); RuntimeError for a session that is twice in the pass, of
  /// another model, or waiting for keep_tentative(). A pass longer than `rows` (a caller
  /// feeding a whole prompt at once) grows the buffers, kept for later passes. If the pass
  /// throws, every tentative feed keeps nothing; the other sessions hold part of a pass
  /// (as after a Session::feed that threw).
  void run(std::span<const BatchFeed> feeds, PassOutput& out);

  /// A rank's share of a pass when the model is split over ranks (docs/cluster.md): the
  /// layers its Model holds (MemoryPlan::first_layer, last_layer), with run()'s checks and
  /// its handling of tentative feeds. `in`: the activations the previous rank sent
  /// (prefix [rows, E], then `in_banked` AttnRes block snapshots [rows, E] each), empty on
  /// the first rank, which embeds the tokens instead. `out`: on the last rank the logits, as
  /// run() writes them; on the others the activations for the next rank in the same layout,
  /// with `out_banked` snapshots. Plain fp32 rows: sent as bytes, the next rank computes
  /// exactly what one process would. On the last rank every feed's answered rows come out,
  /// whatever it asks for; answer() then makes run()'s output of them.
  void run_stage(std::span<const BatchFeed> feeds, std::span<const float> in, std::size_t in_banked,
                 std::vector<float>& out, std::size_t& out_banked);
  /// On the rank holding the head, right after run_stage() over the same feeds: from
  /// `logits` (every answered row), each feed's picks and the logits rows it asks for.
  void answer(std::span<const BatchFeed> feeds, std::span<const float> logits, PassOutput& out);

  /// Rank 0 of a model split over ranks (Model::set_pass_link): run() in two halves, so that
  /// several passes are in flight at once, each on another rank. launch() runs this rank's
  /// layers over `feeds` and hands the pass on, returning its number at once; collect()
  /// waits for the answer of the oldest pass launched (`pass`), as run() gives it. The
  /// sessions of a pass in flight are fed nothing else until it is collected. If collect()
  /// throws, every tentative feed of its pass keeps nothing. RuntimeError on a whole model.
  std::uint64_t launch(std::span<const BatchFeed> feeds);
  void collect(std::uint64_t pass, PassOutput& out);
  /// The passes worth keeping in flight: the link's stages, 1 on a whole model.
  [[nodiscard]] std::size_t stages() const noexcept;

  /// The rows one pass holds without growing.
  [[nodiscard]] std::size_t rows() const noexcept;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace k3
