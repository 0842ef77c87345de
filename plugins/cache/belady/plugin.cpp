// Registers Belady's MIN as cache plugin "belady" (k3-cache-belady.so). No parameters;
// needs the future request stream (README.md).
#include <memory>
#include <string>
#include <vector>

#include <k3/plugin.hpp>

#include "belady_policy.hpp"

namespace {

k3::sdk::Status make_belady(const k3::sdk::CreateArgs& args, std::unique_ptr<k3::sdk::CachePolicy>& out,
                            std::vector<std::string>& unknown_params) {
  const k3::sdk::ParamReader params(args.params, {});  // the policy takes no parameters
  unknown_params = params.unused();
  out = std::make_unique<k3cache::BeladyPolicy>();
  return k3::sdk::Status::success();
}

}  // namespace

K3_PLUGIN(cache, "belady", "1.0.0", make_belady, nullptr)
K3_PLUGIN_NO_PARAMS()
