// k3host plugin SDK: an optional capability of expert-cache policies — being told about
// prefetches. \since ABI 3 (additive: a policy without it works unchanged)
//
// With cache.prefetch.depth > 0 the host predicts the experts of the next MoE layers from
// their routers and reads the likely misses ahead into free slots or victims the policy
// chooses (docs/cache.md, "Router-lookahead prefetch"). For each such key the host calls,
// in this order and from the same thread as every other event:
//
//   choose_victim(key, query) -> victim; on_remove(victim)     when no slot is free
//   on_insert(key)
//   on_prefetch(key)                                            only if the policy has this interface
//
// No on_access comes with a prefetch: the key was not requested. When the layer later
// requests it, on_access comes as for any request (the host counts it as a prefetch hit,
// not a hit). A prefetched key may be evicted before use like any other; a prefetch never
// evicts a leased or pinned key, a key the layer being computed requested, or another
// prefetched key not yet used (query.evictable() is false for them).
//
// A policy opts in by deriving from both CachePolicy and CachePrefetchListener; the host
// finds it with dynamic_cast on the CachePolicy it created.
#pragma once
#include <k3/cache_policy.hpp>

namespace k3::sdk {

class __attribute__((visibility("default"))) CachePrefetchListener {
 public:
  virtual ~CachePrefetchListener() = default;
  /// `key` was just inserted (on_insert) by a prefetch rather than a request: rank it as
  /// the policy sees fit (it is likely requested within a layer or two).
  virtual void on_prefetch(ExpertKey key) noexcept = 0;
};

}  // namespace k3::sdk
