// Cache policy `lru`: exact least-recently-used over (layer, expert) keys.
//
// Recency: on_access of a resident key makes it the most recent; on_insert puts the key
// at the most-recent end too (a miss is inserted right after its access; a prefetched key
// counts as just used, so it is not the first thing evicted before its use).
// A prefetch (k3/cache_prefetch.hpp: on_insert, then on_prefetch) ranks the key just below
// the most recent key: recent enough to outlive the layer or two until its request, but
// behind the newest key a layer actually requested, which wins a tie.
// choose_victim walks from the least-recent end and returns the first key the host says
// is evictable: leased and pinned keys are skipped, and not_found means every resident key
// is leased. on_access of a key that is not resident changes nothing (its on_insert
// follows); on_remove of an unknown key is ignored.
//
// Cost: the nodes live in a slab and the recency order is a doubly linked list threaded
// through them (common/key_list.hpp); a flat hash index finds a key's node
// (common/key_index.hpp). Both are sized by reset() for the capacity, so no event allocates
// while the host keeps at most that many keys resident (the host calls the policy on every
// expert request of every token). Every event is O(1); choose_victim is O(1 + number of
// leased keys it skips).
#include <memory>
#include <string>
#include <vector>

#include <k3/cache_prefetch.hpp>
#include <k3/plugin.hpp>

#include "key_index.hpp"
#include "key_list.hpp"

namespace {

using k3::sdk::ExpertKey;
using k3::sdk::Status;
using k3::sdk::StatusCode;
using k3cache::kNil;

class LruPolicy final : public k3::sdk::CachePolicy, public k3::sdk::CachePrefetchListener {
 public:
  Status reset(std::uint64_t capacity_slots) noexcept override {
    if (capacity_slots == 0) return Status::error(StatusCode::invalid_argument, "lru: capacity must be > 0 slots");
    try {
      order_.clear();
      slab_.reset(static_cast<std::size_t>(capacity_slots));
      index_.reset(static_cast<std::size_t>(capacity_slots));
      return Status::success();
    } catch (const std::exception& e) {
      return Status::error(StatusCode::out_of_memory, std::string("lru: reset: ") + e.what());
    }
  }

  void on_access(ExpertKey key, std::uint64_t /*seq*/) noexcept override {
    const std::uint32_t n = index_.find(key.packed());
    if (n != kNil) make_newest(n);
  }

  void on_insert(ExpertKey key) noexcept override {
    const std::uint32_t found = index_.find(key.packed());
    if (found != kNil) {
      make_newest(found);
      return;
    }
    try {
      // Beyond the capacity reset() was given, the slab and the index grow (and allocate).
      const std::uint32_t n = slab_.alloc(Node{key});
      try {
        index_.insert(key.packed(), n);
      } catch (...) {
        slab_.release(n);
        throw;
      }
      order_.push_head(slab_, n);
    } catch (...) {
      // Out of memory while growing: the key stays untracked, so it is never offered as a
      // victim (safe), and the host's slot accounting is unaffected.
    }
  }

  void on_prefetch(ExpertKey key) noexcept override {
    // on_insert made it the newest: the key that was newest before goes back in front.
    const std::uint32_t n = index_.find(key.packed());
    if (n == kNil || n != order_.head()) return;
    const std::uint32_t before = slab_[n].next;
    if (before == kNil) return;
    order_.unlink(slab_, before);
    order_.push_head(slab_, before);
  }

  void on_remove(ExpertKey key) noexcept override {
    const std::uint32_t n = index_.find(key.packed());
    if (n == kNil) return;
    order_.unlink(slab_, n);
    index_.erase(key.packed());
    try {
      slab_.release(n);
    } catch (...) {
      // Out of memory while recording the free node: it is simply not reused.
    }
  }

  Status choose_victim(ExpertKey /*incoming*/, const k3::sdk::VictimQuery& query, ExpertKey& victim) noexcept override {
    // From the least recent end (the list's tail) toward the newest.
    for (std::uint32_t n = order_.tail(); n != kNil; n = slab_[n].prev) {
      if (query.evictable(slab_[n].key)) {
        victim = slab_[n].key;
        return Status::success();
      }
    }
    return Status::error(StatusCode::not_found, "lru: every resident key is leased or pinned");
  }

  [[nodiscard]] bool wants_future() const noexcept override { return false; }

  Status set_future(std::span<const ExpertKey> /*requests*/) noexcept override {
    return Status::error(StatusCode::unsupported, "lru does not use the future request stream");
  }

 private:
  struct Node {
    ExpertKey key;
    std::uint32_t prev = kNil;  ///< toward the newest
    std::uint32_t next = kNil;  ///< toward the oldest
  };

  void make_newest(std::uint32_t n) noexcept {
    if (n == order_.head()) return;
    order_.unlink(slab_, n);
    order_.push_head(slab_, n);
  }

  k3cache::NodeSlab<Node> slab_;
  k3cache::KeyList<Node> order_;  // head = most recent, tail = next victim candidate
  k3cache::KeyIndex index_;       // packed key → node
};

}  // namespace

namespace k3::cache::lru {

sdk::Status create(const sdk::CreateArgs& args, std::unique_ptr<sdk::CachePolicy>& out,
                   std::vector<std::string>& unknown_params) {
  const sdk::ParamReader params(args.params, {});  // the policy takes no parameters
  unknown_params = params.unused();
  out = std::make_unique<LruPolicy>();
  return sdk::Status::success();
}

}  // namespace k3::cache::lru

K3_PLUGIN(cache, "lru", "1.0.0", k3::cache::lru::create, nullptr)
K3_PLUGIN_NO_PARAMS()
