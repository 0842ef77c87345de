// nextuse: evicts the key predicted to be needed last, with the prediction learned online
// from the run itself (no trace, no future). A k3host cache policy.
//
// Belady evicts the key whose next use is farthest away. nextuse estimates, for each
// sampled evictable key, E[1 / T] with T the number of serving groups until its next use,
// and evicts the smallest (a key that may never come back scores 0, so it goes first).
// The estimate combines two things:
//   - when the key can next be used: a token visits the MoE layers in order, so a key of
//     layer l is not needed before layer l is served again; its k-th next visit is
//     `cyclic distance to l + (k - 1) x layers` groups away;
//   - at which of its layer's future visits it comes back: a histogram of reuse gaps (in
//     visits of the key's layer) per feature bucket (its last two gaps; optionally per
//     layer), learned from every re-access of the run (ReuseModel, reuse_model.hpp).
// The host's groups are seen through on_access: a change of layer starts a new visit.
// Per-key state (last visit, last two gaps, count) is kept for every key seen, resident or not,
// so a returning key keeps its history.
//
// Victims are chosen among the `oldest` least recently accessed evictable keys and `sample`
// evictable keys drawn with a seeded generator (all resident keys when the cache has at
// most `sample`); ties go to the key accessed least recently, then the lower packed key.
// Deterministic for a given seed.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include <k3/cache_policy.hpp>

#include "key_index.hpp"
#include "key_list.hpp"
#include "reuse_model.hpp"
#include "splitmix64.hpp"

namespace k3cache {

struct NextUseParams {
  std::uint32_t sample = 0;  ///< random candidates per eviction
  std::uint32_t oldest = 0;  ///< least recently accessed candidates per eviction
  bool per_layer = false;    ///< one gap table per layer (else one for all layers)
  bool layer_order = true;   ///< time a key's next use by its layer's place in the token
  std::uint64_t seed = 0;    ///< the candidate sampler's seed
};

class NextUsePolicy final : public k3::sdk::CachePolicy {
 public:
  explicit NextUsePolicy(NextUseParams params) : params_(params) {}

  k3::sdk::Status reset(std::uint64_t capacity_slots) noexcept override;
  void on_access(k3::sdk::ExpertKey key, std::uint64_t seq) noexcept override;
  void on_insert(k3::sdk::ExpertKey key) noexcept override;
  void on_remove(k3::sdk::ExpertKey key) noexcept override;
  k3::sdk::Status choose_victim(k3::sdk::ExpertKey incoming, const k3::sdk::VictimQuery& query,
                                k3::sdk::ExpertKey& victim) noexcept override;
  [[nodiscard]] bool wants_future() const noexcept override { return false; }
  k3::sdk::Status set_future(std::span<const k3::sdk::ExpertKey> requests) noexcept override;

 private:
  static constexpr std::uint32_t kNotResident = 0xFFFFFFFFu;
  static constexpr std::size_t kMaxLayers = 128;  ///< layers with their own table and visit count
  struct Meta {
    std::uint64_t key = 0;
    std::uint64_t last_visit = 0;        ///< its layer's visit count at the last access
    std::uint64_t last_access = 0;       ///< policy clock at the last access (tie-break)
    std::uint64_t last_gap = 0;          ///< visits between its last two accesses; 0 = none yet
    std::uint64_t previous_gap = 0;      ///< the gap before last_gap; 0 = none
    std::uint32_t count = 0;             ///< accesses (saturating)
    std::uint32_t dense = kNotResident;  ///< position in resident_, or kNotResident
    std::uint32_t prev = kNil;           ///< recency list links (KeyList orientation: prev = newer)
    std::uint32_t next = kNil;
  };

  std::uint32_t meta_of(std::uint64_t packed);
  [[nodiscard]] std::size_t layer_slot(std::uint32_t layer) const noexcept {
    return layer < kMaxLayers ? layer : kMaxLayers - 1;
  }
  [[nodiscard]] double score_meta(const Meta& m) const noexcept;
  [[nodiscard]] std::uint8_t bucket_of(const Meta& m) const noexcept;

  std::uint64_t next_random() noexcept;

  NextUseParams params_;
  std::uint64_t capacity_ = 0;
  std::uint64_t clock_ = 0;
  k3cache::SplitMix64 rng_;
  bool started_ = false;
  std::uint32_t current_layer_ = 0;
  std::uint32_t min_layer_ = 0xFFFFFFFFu;
  std::uint32_t max_layer_ = 0;
  std::vector<std::uint64_t> visits_;    // per layer slot: visits started
  KeyIndex index_;                       // every key seen -> its Meta
  NodeSlab<Meta> metas_;                 // never released: a key seen is remembered
  std::vector<std::uint32_t> resident_;  // Meta ids of resident keys (dense, any order)
  KeyList<Meta> recency_;                // resident keys by last access, head = newest
  ReuseModel model_;
};

}  // namespace k3cache
