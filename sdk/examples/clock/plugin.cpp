// Registers the CLOCK policy as cache plugin "clock" (file k3-cache-clock.so).
// Parameters:
//   insert_referenced  bool, default true: a key loaded on its own miss starts with its
//                      reference bit set (prefetched keys never do).
#include <memory>
#include <string>
#include <vector>

#include <k3/plugin.hpp>

#include "clock_policy.hpp"

namespace {

k3::sdk::Status make_clock(const k3::sdk::CreateArgs& args, std::unique_ptr<k3::sdk::CachePolicy>& out,
                           std::vector<std::string>& unknown_params) {
  k3::sdk::ParamReader params(args.params);
  k3::sdk::Status status;
  const bool insert_referenced = params.get_bool("insert_referenced", true, status);
  if (!status.ok()) return status;
  unknown_params = params.unused();
  out = std::make_unique<clock_example::ClockPolicy>(insert_referenced);
  return k3::sdk::Status::success();
}

}  // namespace

K3_PLUGIN(cache, "clock", "1.0.0", make_clock, nullptr)
