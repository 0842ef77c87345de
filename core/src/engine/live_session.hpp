// What a k3::Session holds (its carried state, pending ids, the journals of a tentative
// chunk, its routing listener), shared by session.cpp and the batched pass
// (batch_forward.cpp), which feeds several sessions' states in one forward pass.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <k3/model.hpp>

#include "maths/blocks/blocks.hpp"
#include "maths/run_buffers.hpp"
#include "maths/state.hpp"
#include "maths/tentative.hpp"

namespace k3 {

/// Routes the pass's routing decisions to the listener of the session each row belongs to:
/// a slice's rows reach its session's listener as one serving group (on_group with the
/// slice's rows, then one on_route per row).
class SliceListeners final : public maths::RoutingObserver {
 public:
  /// `listeners[i]`: slice i's listener, or null.
  void set(std::span<RoutingListener* const> listeners) noexcept { listeners_ = listeners; }
  /// The rows of each slice (for on_group), in slice order.
  void set_rows(std::span<const maths::SeqSlice> slices) noexcept { slices_ = slices; }
  [[nodiscard]] bool any() const noexcept {
    for (RoutingListener* l : listeners_)
      if (l != nullptr) return true;
    return false;
  }
  void on_group(std::size_t layer, std::size_t) override { layer_ = layer; }
  void on_slice(std::size_t index) override {
    current_ = index < listeners_.size() ? listeners_[index] : nullptr;
    if (current_ != nullptr) current_->on_group(layer_, slices_[index].rows);
  }
  void on_route(std::int64_t position, std::size_t layer, std::span<const std::uint32_t> experts) override {
    if (current_ != nullptr) current_->on_route(position, layer, experts);
  }

 private:
  std::span<RoutingListener* const> listeners_;
  std::span<const maths::SeqSlice> slices_;
  std::size_t layer_ = 0;
  RoutingListener* current_ = nullptr;
};

struct Session::Impl {
  Model& model;
  std::int64_t max_positions;
  maths::SequenceState state;
  std::vector<std::uint32_t> pending;  ///< conversation ids not fed yet (Session::pending)
  /// The run buffers of feed() and feed_tentative(), sized by the plan's chunk for this
  /// Session's context when first used: a session fed only in batched passes
  /// (k3::BatchForward, whose buffers the plan counts once for every sequence) never
  /// allocates them.
  maths::RunBuffers buffers;
  maths::TentativeChunk tentative;  ///< a tentative chunk's journals, grown on first use
  maths::KdaBuffers keep_buffers;   ///< keep_tentative's scratch (bk: D doubles)
  /// Set while a batched pass's tentative chunk waits for keep_tentative(): its first position.
  std::optional<std::int64_t> open_tentative;
  RoutingListener* listener = nullptr;
  std::string unsound;  ///< why the carried state is not the model's (an accepted unsound load)
};

namespace engine {

/// Refuses (UsageError) `tokens` that cannot follow what `s` holds: none, an id outside
/// the vocabulary, more than the context has room for; and (RuntimeError) a session whose
/// tentative chunk still waits for keep_tentative(). Before any compute.
void check_feed(const Session::Impl& s, std::span<const std::uint32_t> tokens);

/// Keeps the first `keep` tokens of the tentative chunk `s` was fed at `pos0` (maths/
/// tentative.hpp) and closes it.
void keep_tentative(Session::Impl& s, std::int64_t pos0, std::size_t keep);

}  // namespace engine
}  // namespace k3
