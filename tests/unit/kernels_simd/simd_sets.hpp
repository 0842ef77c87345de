// The SIMD kernel sets under test and the scalar reference, all loaded the way the engine
// loads them: through k3::PluginHost from the plugin search path.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <k3/plugin_host.hpp>

namespace k3simd {

/// One host for the whole executable (it keeps every library loaded until exit).
inline k3::PluginHost& host() {
  static k3::PluginHost h;
  return h;
}

/// The SIMD sets this target can build.
inline std::vector<std::string> simd_set_names() {
#if defined(__x86_64__)
  return {"avx2", "avx512"};
#elif defined(__aarch64__)
  return {"neon"};
#else
  return {};
#endif
}

inline const k3::PluginInfo* find_kernels(const std::string& name) {
  for (const auto& info : host().plugins())
    if (info.kind == k3::PluginKind::kernels && info.name == name) return &info;
  return nullptr;
}

struct NamedSet {
  std::string name;
  std::shared_ptr<k3::sdk::KernelSet> set;
};

/// The SIMD sets that are built and can run on this CPU. A set that is missing or cannot
/// run here is reported with WARN (a skip with its reason, never a silent pass).
inline std::vector<NamedSet> runnable_simd_sets() {
  std::vector<NamedSet> out;
  for (const auto& name : simd_set_names()) {
    const k3::PluginInfo* info = find_kernels(name);
    if (info == nullptr) {
      WARN("SKIP kernel set " << name << ": plugin k3-kernels-" << name << ".so not found on the search path");
      continue;
    }
    if (info->score == 0) {
      WARN("SKIP kernel set " << name << ": this CPU cannot run it (score 0)");
      continue;
    }
    out.push_back({name, host().create_kernels(name, {})});
  }
  return out;
}

inline std::shared_ptr<k3::sdk::KernelSet> scalar_set() { return host().create_kernels("scalar", {}); }

}  // namespace k3simd
