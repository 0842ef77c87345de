// Registers SIEVE as cache plugin "sieve" (k3-cache-sieve.so). No parameters (K3_PLUGIN_NO_PARAMS).
#include <memory>
#include <string>
#include <vector>

#include <k3/plugin.hpp>

#include "sieve_policy.hpp"

namespace {

k3::sdk::Status make_sieve(const k3::sdk::CreateArgs& args, std::unique_ptr<k3::sdk::CachePolicy>& out,
                           std::vector<std::string>& unknown_params) {
  const k3::sdk::ParamReader params(args.params, {});  // the policy takes no parameters
  unknown_params = params.unused();
  out = std::make_unique<k3cache::SievePolicy>();
  return k3::sdk::Status::success();
}

}  // namespace

K3_PLUGIN(cache, "sieve", "1.0.0", make_sieve, nullptr)
K3_PLUGIN_NO_PARAMS()
