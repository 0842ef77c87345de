// Registers S3-FIFO as cache plugin "s3fifo" (k3-cache-s3fifo.so). Parameters: kParams below (README.md explains them).
#include <memory>
#include <string>
#include <vector>

#include <k3/plugin.hpp>

#include "s3fifo_policy.hpp"

namespace {

using k3::sdk::Status;
using k3::sdk::StatusCode;

constexpr k3::sdk::ParamDescriptor kParams[] = {
    k3::sdk::param::number(
        "small_ratio", "0.1", "(0, 1]",
        "SMALL (probation) queue target as a fraction of the slots, at least 1 slot; the paper's 10 %"),
    k3::sdk::param::number("ghost_ratio", "1", "[0, 16]",
                           "GHOST entries (keys recently evicted from SMALL) per MAIN-target slot; 0 disables GHOST"),
    k3::sdk::param::integer("move_to_main_threshold", "1", "[1, 3]",
                            "2-bit hit counter value that promotes a SMALL key to MAIN; 1 = one hit while in SMALL"),
};

Status make_s3fifo(const k3::sdk::CreateArgs& args, std::unique_ptr<k3::sdk::CachePolicy>& out,
                   std::vector<std::string>& unknown_params) {
  k3::sdk::ParamReader params(args.params, kParams);
  if (!params.ok()) return params.status();
  k3cache::S3FifoParams p;
  p.small_ratio = params.get_double("small_ratio");
  p.ghost_ratio = params.get_double("ghost_ratio");
  p.move_to_main_threshold = params.get_int<std::uint32_t>("move_to_main_threshold");
  unknown_params = params.unused();
  out = std::make_unique<k3cache::S3FifoPolicy>(p);
  return Status::success();
}

}  // namespace

K3_PLUGIN(cache, "s3fifo", "1.0.0", make_s3fifo, nullptr)
K3_PLUGIN_PARAMS(kParams)
