// LeCaR (Vietri et al., "Driving Cache Replacement with ML-based LeCaR", HotStorage 2018)
// as a k3host cache policy: regret minimisation over two experts, LRU and LFU.
//
// Each eviction asks both experts for their victim and follows one of them, drawn with
// probability w_lru / w_lfu (a seeded generator; the same seed gives the same run). The
// victim goes to a HISTORY of `history_ratio` x capacity keys, labelled with the expert
// that chose it (no label when both experts chose the same key). A miss on a key still in
// HISTORY means that expert was wrong: the *other* expert's weight is multiplied by
// exp(learning_rate x discount^age), age = requests since the eviction, and the weights
// are normalised. discount = 0.005^(1 / capacity) as in the paper, so a regret learned
// about a key evicted a cache-turnover ago is worth 0.5 % of a fresh one.
//
// The LFU expert counts with exponential decay (half-life `halflife` x capacity requests)
// instead of the paper's plain counts, so an expert popular long ago fades; its score is
// log2(sum over the key's accesses of 2^(t / half-life)), which orders keys by decayed
// count without touching every key as time passes. A key coming back from HISTORY gets
// its score back (as in the paper). Ties go to the least recently used key.
//
// A key the host cannot evict (leased, pinned) is passed over: each expert takes the next
// key in its own order. Costs: O(log n) per request (an indexed heap), O(1) for LRU; no
// allocation per event after reset() (the tables are sized by capacity).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include <k3/cache_policy.hpp>

#include "key_index.hpp"
#include "key_list.hpp"
#include "splitmix64.hpp"

namespace k3cache {

struct LecarParams {
  double learning_rate = 0;  ///< lambda of the weight update (paper: 0.45)
  double history_ratio = 0;  ///< HISTORY entries per slot (paper: 1)
  double halflife = 0;       ///< LFU count half-life, in multiples of capacity requests
  std::uint64_t seed = 0;    ///< the expert draw's seed
};

class LecarPolicy final : public k3::sdk::CachePolicy {
 public:
  explicit LecarPolicy(LecarParams params) : params_(params) {}

  k3::sdk::Status reset(std::uint64_t capacity_slots) noexcept override;
  void on_access(k3::sdk::ExpertKey key, std::uint64_t seq) noexcept override;
  void on_insert(k3::sdk::ExpertKey key) noexcept override;
  void on_remove(k3::sdk::ExpertKey key) noexcept override;
  k3::sdk::Status choose_victim(k3::sdk::ExpertKey incoming, const k3::sdk::VictimQuery& query,
                                k3::sdk::ExpertKey& victim) noexcept override;
  [[nodiscard]] bool wants_future() const noexcept override { return false; }
  k3::sdk::Status set_future(std::span<const k3::sdk::ExpertKey> requests) noexcept override;

 private:
  enum Expert : std::uint8_t { kLru = 0, kLfu = 1, kNone = 2 };
  struct Node {
    std::uint64_t key = 0;
    std::uint32_t prev = kNil;
    std::uint32_t next = kNil;
    std::uint64_t last_use = 0;  // policy clock
    double score = 0;            // log2 of the decayed access count (plus a scale)
    std::uint32_t heap_pos = kNil;
  };
  struct Ghost {
    std::uint64_t key = 0;
    std::uint64_t evicted_at = 0;
    double score = 0;
    Expert expert = kNone;
    bool live = false;
  };

  [[nodiscard]] bool heap_less(std::uint32_t a, std::uint32_t b) const noexcept;
  void heap_swap(std::size_t i, std::size_t j) noexcept;
  void sift_up(std::size_t i) noexcept;
  void sift_down(std::size_t i) noexcept;
  void heap_remove(std::uint32_t node) noexcept;
  [[nodiscard]] double bumped(double score) const noexcept;
  std::uint32_t lru_candidate(const k3::sdk::VictimQuery& query) const noexcept;
  std::uint32_t lfu_candidate(const k3::sdk::VictimQuery& query) noexcept;
  void remember(const Node& n, Expert by) noexcept;
  double next_unit() noexcept;

  LecarParams params_;
  std::uint64_t capacity_ = 0;
  std::uint64_t clock_ = 0;
  k3cache::SplitMix64 rng_;
  double halflife_requests_ = 1;
  double discount_ = 1;
  double w_lru_ = 0.5;
  NodeSlab<Node> slab_;
  KeyList<Node> lru_;                  // resident keys, head = most recently used
  KeyIndex index_;                     // resident key -> node
  std::vector<std::uint32_t> heap_;    // resident nodes, min (score, last use, key) first
  std::vector<std::uint32_t> search_;  // scratch of lfu_candidate's best-first search
  std::vector<Ghost> history_;         // ring of evicted keys
  std::size_t history_next_ = 0;
  KeyIndex history_index_;  // key -> its live ring entry
  KeyIndex missed_;         // keys accessed while not resident, awaiting on_insert
  std::uint64_t last_victim_ = 0;
  Expert last_expert_ = kNone;
  bool have_victim_ = false;
};

}  // namespace k3cache
