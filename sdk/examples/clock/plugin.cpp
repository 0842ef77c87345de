// Registers the CLOCK policy as cache plugin "clock" (file k3-cache-clock.so) and describes
// its one parameter; the factory reads it through the same table (k3/params.hpp).
#include <memory>
#include <string>
#include <vector>

#include <k3/plugin.hpp>

#include "clock_policy.hpp"

namespace {

constexpr k3::sdk::ParamDescriptor kParams[] = {
    k3::sdk::param::boolean(
        "insert_referenced", "true",
        "a key loaded on its own miss starts with its reference bit set (a prefetched key never does)"),
};

k3::sdk::Status make_clock(const k3::sdk::CreateArgs& args, std::unique_ptr<k3::sdk::CachePolicy>& out,
                           std::vector<std::string>& unknown_params) {
  k3::sdk::ParamReader params(args.params, kParams);
  if (!params.ok()) return params.status();
  const bool insert_referenced = params.get_bool("insert_referenced");
  unknown_params = params.unused();
  out = std::make_unique<clock_example::ClockPolicy>(insert_referenced);
  return k3::sdk::Status::success();
}

}  // namespace

K3_PLUGIN(cache, "clock", "1.0.0", make_clock, nullptr)
K3_PLUGIN_PARAMS(kParams)
