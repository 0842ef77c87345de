// Cache policy `lru`: exact least-recently-used over (layer, expert) keys.
//
// Recency: on_access of a resident key makes it the most recent; on_insert puts the key
// at the most-recent end too (a miss is inserted right after its access; a prefetched key
// counts as just used, so it is not the first thing evicted before its use).
// choose_victim walks from the least-recent end and returns the first key the host says
// is evictable: leased and pinned keys are skipped, and not_found means every resident key
// is leased. on_access of a key that is not resident changes nothing (its on_insert
// follows); on_remove of an unknown key is ignored.
//
// Cost: a hash map from the packed key to its entry, and a doubly linked list threaded
// through the entries (intrusive: no second allocation). Every event is O(1);
// choose_victim is O(1 + number of leased keys it skips).
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <k3/plugin.hpp>

namespace {

using k3::sdk::ExpertKey;
using k3::sdk::Status;
using k3::sdk::StatusCode;

class LruPolicy final : public k3::sdk::CachePolicy {
 public:
  Status reset(std::uint64_t capacity_slots) noexcept override {
    if (capacity_slots == 0) return Status::error(StatusCode::invalid_argument, "lru: capacity must be > 0 slots");
    try {
      entries_.clear();
      oldest_ = newest_ = nullptr;
      entries_.reserve(static_cast<std::size_t>(capacity_slots));
      return Status::success();
    } catch (const std::exception& e) {
      return Status::error(StatusCode::out_of_memory, std::string("lru: reset: ") + e.what());
    }
  }

  void on_access(ExpertKey key, std::uint64_t /*seq*/) noexcept override {
    const auto it = entries_.find(key.packed());
    if (it != entries_.end()) make_newest(it->second);
  }

  void on_insert(ExpertKey key) noexcept override {
    try {
      auto [it, inserted] = entries_.try_emplace(key.packed());
      Entry& e = it->second;
      if (inserted) {
        e.key = key;
        link_newest(e);
      } else {
        make_newest(e);
      }
    } catch (...) {
      // Out of memory while growing the map: the key stays untracked, so it is never
      // offered as a victim (safe), and the host's slot accounting is unaffected.
    }
  }

  void on_remove(ExpertKey key) noexcept override {
    const auto it = entries_.find(key.packed());
    if (it == entries_.end()) return;
    unlink(it->second);
    entries_.erase(it);
  }

  Status choose_victim(ExpertKey /*incoming*/, const k3::sdk::VictimQuery& query, ExpertKey& victim) noexcept override {
    for (const Entry* e = oldest_; e != nullptr; e = e->newer) {
      if (query.evictable(e->key)) {
        victim = e->key;
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
  struct Entry {
    ExpertKey key;
    Entry* older = nullptr;
    Entry* newer = nullptr;
  };

  void link_newest(Entry& e) noexcept {
    e.older = newest_;
    e.newer = nullptr;
    if (newest_ != nullptr) newest_->newer = &e;
    newest_ = &e;
    if (oldest_ == nullptr) oldest_ = &e;
  }

  void unlink(Entry& e) noexcept {
    (e.older != nullptr ? e.older->newer : oldest_) = e.newer;
    (e.newer != nullptr ? e.newer->older : newest_) = e.older;
    e.older = e.newer = nullptr;
  }

  void make_newest(Entry& e) noexcept {
    if (&e == newest_) return;
    unlink(e);
    link_newest(e);
  }

  // Entries live in the map's nodes, whose addresses never change (rehashing moves no
  // node), so the list can point at them directly.
  std::unordered_map<std::uint64_t, Entry> entries_;
  Entry* oldest_ = nullptr;  // next victim candidate
  Entry* newest_ = nullptr;
};

}  // namespace

namespace k3::cache::lru {

sdk::Status create(const sdk::CreateArgs& args, std::unique_ptr<sdk::CachePolicy>& out,
                   std::vector<std::string>& unknown_params) {
  const sdk::ParamReader params(args.params);  // the policy takes no parameters
  unknown_params = params.unused();
  out = std::make_unique<LruPolicy>();
  return sdk::Status::success();
}

}  // namespace k3::cache::lru

K3_PLUGIN(cache, "lru", "1.0", k3::cache::lru::create, nullptr)
