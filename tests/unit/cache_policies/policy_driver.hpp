// A minimal host for policy tests: drives a cache policy through the event contract of
// sdk/k3/cache_policy.hpp (on_access for every request; on_insert on a miss with a free
// slot; choose_victim + on_remove + on_insert when full) over keys of layer 0, with an
// explicit set of leased keys, and records every victim. Independent of the simulator, so
// policy tests do not trust the code they are meant to check it against.
#pragma once
#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <k3/cache_policy.hpp>
#include <k3/plugin_host.hpp>

namespace policy_test {

using k3::sdk::ExpertKey;

inline ExpertKey key(std::uint32_t expert, std::uint32_t layer = 0) { return ExpertKey{layer, expert}; }

class Driver {
 public:
  Driver(k3::PluginHost& host, const std::string& policy, std::uint64_t capacity, const k3::PluginParams& params = {})
      : policy_(host.create_cache(policy, params)), capacity_(capacity) {
    const auto st = policy_->reset(capacity);
    REQUIRE(st.ok());
  }

  /// One request. Returns true on a hit. The victim (if any) is appended to victims().
  bool request(ExpertKey k) {
    policy_->on_access(k, seq_++);
    if (resident_.count(k.packed()) != 0) return true;
    if (resident_.size() >= capacity_) {
      ExpertKey victim;
      const Query q(resident_, leased_);
      const auto st = policy_->choose_victim(k, q, victim);
      INFO("choose_victim: " << st.detail);
      REQUIRE(st.ok());
      REQUIRE(q.evictable(victim));
      policy_->on_remove(victim);
      resident_.erase(victim.packed());
      victims_.push_back(victim.expert);
    }
    policy_->on_insert(k);
    resident_.insert(k.packed());
    return false;
  }
  /// Requests experts of layer 0 in order; returns how many were hits.
  int run(const std::vector<std::uint32_t>& experts) {
    int hits = 0;
    for (const std::uint32_t e : experts) hits += request(key(e)) ? 1 : 0;
    return hits;
  }

  void lease(std::uint32_t expert) { leased_.insert(key(expert).packed()); }
  void unlease_all() { leased_.clear(); }
  [[nodiscard]] const std::vector<std::uint32_t>& victims() const { return victims_; }
  k3::sdk::CachePolicy& policy() { return *policy_; }

  /// A query over the driver's resident and leased sets.
  class Query final : public k3::sdk::VictimQuery {
   public:
    Query(const std::set<std::uint64_t>& resident, const std::set<std::uint64_t>& leased)
        : resident_(resident), leased_(leased) {}
    [[nodiscard]] bool evictable(ExpertKey k) const noexcept override {
      return resident_.count(k.packed()) != 0 && leased_.count(k.packed()) == 0;
    }

   private:
    const std::set<std::uint64_t>& resident_;
    const std::set<std::uint64_t>& leased_;
  };
  [[nodiscard]] Query query() const { return Query(resident_, leased_); }

 private:
  std::shared_ptr<k3::sdk::CachePolicy> policy_;
  std::uint64_t capacity_;
  std::uint64_t seq_ = 0;
  std::set<std::uint64_t> resident_;
  std::set<std::uint64_t> leased_;
  std::vector<std::uint32_t> victims_;
};

/// Every policy must refuse to pick a victim when no resident key is evictable.
inline void check_not_found_when_all_leased(k3::PluginHost& host, const std::string& policy) {
  Driver d(host, policy, 2);
  d.run({1, 2});
  d.lease(1);
  d.lease(2);
  ExpertKey victim;
  const auto st = d.policy().choose_victim(key(3), d.query(), victim);
  CHECK(st.code == k3::sdk::StatusCode::not_found);
}

}  // namespace policy_test
