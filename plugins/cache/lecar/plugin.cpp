// Registers LeCaR (LRU and decayed-LFU experts, regret-weighted) as cache plugin "lecar" (k3-cache-lecar.so).
// Parameters: kParams below (README.md explains them).
#include <memory>
#include <string>
#include <vector>

#include <k3/plugin.hpp>

#include "lecar_policy.hpp"

namespace {

constexpr k3::sdk::ParamDescriptor kParams[] = {
    k3::sdk::param::number("learning_rate", "0.45", "(0, 10]",
                           "lambda: how much one regret moves the experts' weights (the paper's 0.45)"),
    k3::sdk::param::number("history_ratio", "1", "[0, 16]",
                           "HISTORY (evicted keys remembered) per slot; 0 turns learning off"),
    k3::sdk::param::number("halflife", "4", "(0, 1000]",
                           "half-life of the LFU expert's counts, in multiples of capacity requests"),
    k3::sdk::param::integer("seed", "1", "[0, )", "seed of the expert draw"),
};

k3::sdk::Status make_lecar(const k3::sdk::CreateArgs& args, std::unique_ptr<k3::sdk::CachePolicy>& out,
                           std::vector<std::string>& unknown_params) {
  k3::sdk::ParamReader params(args.params, kParams);
  if (!params.ok()) return params.status();
  k3cache::LecarParams p;
  p.learning_rate = params.get_double("learning_rate");
  p.history_ratio = params.get_double("history_ratio");
  p.halflife = params.get_double("halflife");
  p.seed = params.get_int<std::uint64_t>("seed");
  unknown_params = params.unused();
  out = std::make_unique<k3cache::LecarPolicy>(p);
  return k3::sdk::Status::success();
}

}  // namespace

K3_PLUGIN(cache, "lecar", "1.0.0", make_lecar, nullptr)
K3_PLUGIN_PARAMS(kParams)
