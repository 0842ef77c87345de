// Registers the online next-use predictor as cache plugin "nextuse" (k3-cache-nextuse.so). Parameters: kParams below
// (README.md explains them).
#include <memory>
#include <string>
#include <vector>

#include <k3/plugin.hpp>

#include "nextuse_policy.hpp"

namespace {

constexpr k3::sdk::ParamDescriptor kParams[] = {
    k3::sdk::param::integer(
        "sample", "64", "[1, 4096]",
        "evictable keys scored per eviction (drawn at random; all of them when the cache holds no more)"),
    k3::sdk::param::integer("oldest", "8", "[0, 4096]",
                            "least recently accessed evictable keys scored per eviction, besides the random ones"),
    k3::sdk::param::boolean("per_layer", "false", "learn one reuse-gap table per layer instead of one for all layers"),
    k3::sdk::param::boolean("layer_order", "true",
                            "time a key's next use by where its layer comes in the token; false = every key a whole "
                            "token away (for comparison)"),
    k3::sdk::param::integer("seed", "1", "[0, )", "seed of the candidate sampler"),
};

k3::sdk::Status make_nextuse(const k3::sdk::CreateArgs& args, std::unique_ptr<k3::sdk::CachePolicy>& out,
                             std::vector<std::string>& unknown_params) {
  k3::sdk::ParamReader params(args.params, kParams);
  if (!params.ok()) return params.status();
  k3cache::NextUseParams p;
  p.sample = params.get_int<std::uint32_t>("sample");
  p.oldest = params.get_int<std::uint32_t>("oldest");
  p.per_layer = params.get_bool("per_layer");
  p.layer_order = params.get_bool("layer_order");
  p.seed = params.get_int<std::uint64_t>("seed");
  unknown_params = params.unused();
  out = std::make_unique<k3cache::NextUsePolicy>(p);
  return k3::sdk::Status::success();
}

}  // namespace

K3_PLUGIN(cache, "nextuse", "1.0.0", make_nextuse, nullptr)
K3_PLUGIN_PARAMS(kParams)
