// Kernel sets as the host sees them: loaded by k3::PluginHost from the plugin search path.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <k3/plugin_host.hpp>

namespace k3test {

/// One host for the whole test executable (libraries stay loaded until exit anyway).
inline k3::PluginHost& plugin_host() {
  static k3::PluginHost host;
  return host;
}

struct NamedKernelSet {
  std::string name;
  std::shared_ptr<k3::sdk::KernelSet> set;
};

/// The reference set every other set must match.
inline std::shared_ptr<k3::sdk::KernelSet> scalar_kernels() { return plugin_host().create_kernels("scalar", {}); }

/// Every kernel set on the search path that can run on this CPU (score > 0): the contract
/// tests run on each of them, the scalar set first.
inline std::vector<NamedKernelSet> runnable_kernel_sets() {
  std::vector<NamedKernelSet> out{{"scalar", scalar_kernels()}};
  for (const auto& info : plugin_host().plugins())
    if (info.kind == k3::PluginKind::kernels && info.score > 0 && info.name != "scalar")
      out.push_back({info.name, plugin_host().create_kernels(info.name, {})});
  return out;
}

}  // namespace k3test
