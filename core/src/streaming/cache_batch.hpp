// The host's decisions for one batch of expert requests, shared by the live expert cache
// (streaming/expert_cache.cpp) and the simulator (sim/sim_replay.cpp) so that the two cannot
// drift: `k3host sim` on a run's trace reproduces that run's hits, misses and evictions
// exactly, for every policy.
//
// The protocol, per serving group (one forward chunk's requests at one MoE layer):
//   1. on_access(key, seq) for every request of the group, in request order (the caller).
//   2. The group's distinct experts, sorted by id, in batches of at most `capacity` slots;
//      per batch, cache_batch():
//        a. every resident expert of the batch is a hit and is leased first, so that a miss
//           of the same batch can never evict it;
//        b. then each missing expert, in id order: a free slot, or choose_victim among the
//           resident keys that are not leased (query.evictable), on_remove(victim); then
//           on_insert(key); the new key is leased too;
//      then the batch is computed and its leases released (the caller).
//   Hits and misses are counted per request: an expert `uses` requests of the group asked
//   for counts `uses` hits when resident, else `uses` misses (it is read once).
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include <k3/cache_policy.hpp>

namespace k3::streaming {

struct BatchCounts {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t evictions = 0;
};

inline std::string describe_key(sdk::ExpertKey k) {
  return "(layer " + std::to_string(k.layer) + ", expert " + std::to_string(k.expert) + ")";
}

/// Serves the distinct, id-sorted experts `ids` of `layer` (at most the capacity), with
/// uses(i) the requests behind ids[i]. `Slots` is the residency view, a sdk::VictimQuery
/// (evictable = resident and not leased) with:
///   bool resident(ExpertKey) const          the key occupies a slot
///   void lease(ExpertKey)                   a resident key joins the batch (hit)
///   bool admit_free(ExpertKey)              a free slot now holds the key, leased; false when full
///   void replace(ExpertKey victim, ExpertKey key)   the victim's slot now holds key, leased
/// `fail(message)` must throw; it is called when the policy finds no victim or offers one
/// that is not resident or is leased.
template <class Slots, class Uses, class Fail>
void cache_batch(sdk::CachePolicy& policy, Slots& slots, std::uint32_t layer, std::span<const std::uint32_t> ids,
                 Uses&& uses, BatchCounts& counts, Fail&& fail) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const sdk::ExpertKey key{layer, ids[i]};
    if (!slots.resident(key)) continue;
    slots.lease(key);
    counts.hits += uses(i);
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const sdk::ExpertKey key{layer, ids[i]};
    if (slots.resident(key)) continue;  // a hit, leased above (or admitted earlier in this loop: ids are distinct)
    counts.misses += uses(i);
    if (!slots.admit_free(key)) {
      sdk::ExpertKey victim{};
      const sdk::Status st = policy.choose_victim(key, slots, victim);
      if (!st.ok())
        fail("no victim for " + describe_key(key) + ": " + std::string(sdk::to_string(st.code)) + ": " + st.detail);
      if (!slots.resident(victim))
        fail("chose victim " + describe_key(victim) + " for " + describe_key(key) + ", which is not resident");
      if (!slots.evictable(victim))
        fail("chose victim " + describe_key(victim) + " for " + describe_key(key) +
             ", which is leased by the batch being served");
      policy.on_remove(victim);
      slots.replace(victim, key);
      ++counts.evictions;
    }
    policy.on_insert(key);
  }
}

}  // namespace k3::streaming
