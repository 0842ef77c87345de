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

  /// The rows one pass holds without growing.
  [[nodiscard]] std::size_t rows() const noexcept;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace k3
