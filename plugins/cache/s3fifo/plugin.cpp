// Registers S3-FIFO as cache plugin "s3fifo" (k3-cache-s3fifo.so). Parameters: README.md.
#include <memory>
#include <string>
#include <vector>

#include <k3/plugin.hpp>

#include "s3fifo_policy.hpp"

namespace {

using k3::sdk::Status;
using k3::sdk::StatusCode;

Status make_s3fifo(const k3::sdk::CreateArgs& args, std::unique_ptr<k3::sdk::CachePolicy>& out,
                   std::vector<std::string>& unknown_params) {
  k3::sdk::ParamReader params(args.params);
  Status status;
  k3cache::S3FifoParams p;
  p.small_ratio = params.get_double("small_ratio", p.small_ratio, status);
  if (!status.ok()) return status;
  p.ghost_ratio = params.get_double("ghost_ratio", p.ghost_ratio, status);
  if (!status.ok()) return status;
  p.move_to_main_threshold = params.get_int<std::uint32_t>("move_to_main_threshold", p.move_to_main_threshold, status);
  if (!status.ok()) return status;
  if (!(p.small_ratio > 0.0 && p.small_ratio <= 1.0))
    return Status::error(StatusCode::invalid_argument,
                         "small_ratio: must be in (0, 1], got " + std::to_string(p.small_ratio));
  if (!(p.ghost_ratio >= 0.0 && p.ghost_ratio <= 16.0))
    return Status::error(StatusCode::invalid_argument,
                         "ghost_ratio: must be in [0, 16], got " + std::to_string(p.ghost_ratio));
  if (p.move_to_main_threshold < 1 || p.move_to_main_threshold > 3)
    return Status::error(StatusCode::invalid_argument, "move_to_main_threshold: must be 1, 2 or 3 (the counter has 2 bits), got " +
                                                           std::to_string(p.move_to_main_threshold));
  unknown_params = params.unused();
  out = std::make_unique<k3cache::S3FifoPolicy>(p);
  return Status::success();
}

}  // namespace

K3_PLUGIN(cache, "s3fifo", "1.0.0", make_s3fifo, nullptr)
