// Registers LFU with aging as cache plugin "lfu" (k3-cache-lfu.so). Parameters: kParams below (README.md explains
// them).
#include <memory>
#include <string>
#include <vector>

#include <k3/plugin.hpp>

#include "lfu_policy.hpp"

namespace {

constexpr k3::sdk::ParamDescriptor kParams[] = {
    k3::sdk::param::integer("halve_every", "0", "[0, )",
                            "requests between two halvings of every resident count; 0 = 4 x capacity"),
};

k3::sdk::Status make_lfu(const k3::sdk::CreateArgs& args, std::unique_ptr<k3::sdk::CachePolicy>& out,
                         std::vector<std::string>& unknown_params) {
  k3::sdk::ParamReader params(args.params, kParams);
  if (!params.ok()) return params.status();
  const auto halve_every = params.get_int<std::uint64_t>("halve_every");
  unknown_params = params.unused();
  out = std::make_unique<k3cache::LfuPolicy>(halve_every);
  return k3::sdk::Status::success();
}

}  // namespace

K3_PLUGIN(cache, "lfu", "1.0.0", make_lfu, nullptr)
K3_PLUGIN_PARAMS(kParams)
