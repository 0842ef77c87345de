// Cache-policy test support: policies loaded through k3::PluginHost, and the host-side
// view a policy queries while choosing a victim.
#pragma once
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <k3/plugin_host.hpp>

namespace k3test {

inline k3::PluginHost& plugin_host() {
  static k3::PluginHost host;
  return host;
}

inline std::shared_ptr<k3::sdk::CachePolicy> cache_policy(const std::string& name) {
  return plugin_host().create_cache(name, {});
}

/// Every cache policy on the plugin search path.
inline std::vector<std::string> cache_policy_names() {
  std::vector<std::string> names;
  for (const auto& info : plugin_host().plugins())
    if (info.kind == k3::PluginKind::cache) names.push_back(info.name);
  return names;
}

inline k3::sdk::ExpertKey key(std::uint32_t layer, std::uint32_t expert) { return {layer, expert}; }

/// What the host knows: resident keys, and which of them are leased or pinned.
class HostView final : public k3::sdk::VictimQuery {
 public:
  std::set<std::uint64_t> resident;
  std::set<std::uint64_t> leased;                 // leased or pinned: never a victim
  mutable std::vector<k3::sdk::ExpertKey> asked;  // every key the policy asked about

  [[nodiscard]] bool evictable(k3::sdk::ExpertKey k) const noexcept override {
    try {
      asked.push_back(k);
    } catch (...) {
    }
    return resident.count(k.packed()) != 0 && leased.count(k.packed()) == 0;
  }
  [[nodiscard]] bool any_evictable() const {
    for (auto k : resident)
      if (leased.count(k) == 0) return true;
    return false;
  }
};

}  // namespace k3test
