// Storage `throttle`: wraps another backend and holds each read back until an emulated
// device would have finished it (LinkModel: bandwidth, per-request latency, requests in
// flight). The real read runs first; the batch then sleeps until its last request's
// emulated completion, so a fast disk or the page cache behaves like an NVMe drive, a SATA
// SSD or a network volume, the same way on every run.
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <k3/plugin.hpp>

#include "common/decorator.hpp"
#include "common/inner_backend.hpp"
#include "link_model.hpp"

namespace local = k3::storage::local;

namespace {

using k3::sdk::Status;
using k3::sdk::StatusCode;
using Clock = std::chrono::steady_clock;

/// The shared device: one per backend, so every file opened through it shares the link.
struct Device {
  Device(double bytes_per_second, double latency_seconds, unsigned max_inflight)
      : model(bytes_per_second, latency_seconds, max_inflight) {}
  std::mutex mutex;
  k3::storage::throttle::LinkModel model;
  const Clock::time_point epoch = Clock::now();

  /// Reserves the device for the batch; returns when the emulated device is done.
  Clock::time_point reserve(std::span<const k3::sdk::ReadRequest> batch) {
    const std::lock_guard lock(mutex);
    const double now = std::chrono::duration<double>(Clock::now() - epoch).count();
    double last = now;
    for (const auto& r : batch)
      if (r.length > 0) last = std::max(last, model.issue(now, r.length));
    return epoch + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(last));
  }
};

class ThrottleFile final : public local::DecoratorFile {
 public:
  ThrottleFile(std::unique_ptr<k3::sdk::StorageFile> inner, std::shared_ptr<Device> device)
      : DecoratorFile(std::move(inner)), device_(std::move(device)) {}

  Status read(std::span<k3::sdk::ReadRequest> batch) noexcept override {
    Clock::time_point done;
    try {
      done = device_->reserve(batch);
    } catch (const std::exception& e) {
      return Status::error(StatusCode::out_of_memory, std::string("throttle: ") + e.what());
    }
    Status st = inner().read(batch);
    std::this_thread::sleep_until(done);
    return st;
  }

 private:
  std::shared_ptr<Device> device_;
};

class ThrottleBackend final : public local::DecoratorBackend {
 public:
  ThrottleBackend(std::unique_ptr<k3::sdk::StorageBackend> inner, std::shared_ptr<Device> device)
      : DecoratorBackend(std::move(inner)), device_(std::move(device)) {}

 private:
  Status wrap(std::string_view /*uri*/, std::unique_ptr<k3::sdk::StorageFile> inner,
              std::unique_ptr<k3::sdk::StorageFile>& out) override {
    out = std::make_unique<ThrottleFile>(std::move(inner), device_);
    return Status::success();
  }

  std::shared_ptr<Device> device_;
};

}  // namespace

namespace k3::storage::throttle {

constexpr k3::sdk::ParamDescriptor kParams[] = {
    local::inner_name("posix"),
    local::kInnerKeys,
    sdk::param::number("bandwidth_mbps", "0", "[0, )", "link bandwidth in MB/s (10^6 bytes per second); 0 = unlimited"),
    sdk::param::number("latency_us", "0", "[0, 60000000]", "per-request latency in microseconds"),
    sdk::param::integer("max_inflight", "0", "[0, 65536]", "requests the device serves at once; 0 = unlimited"),
};

sdk::Status create(const sdk::CreateArgs& args, std::unique_ptr<sdk::StorageBackend>& out,
                   std::vector<std::string>& unknown_params) {
  sdk::ParamReader params(args.params, kParams);
  if (!params.ok()) return params.status();
  const local::InnerBackend inner(params);
  const double mbps = params.get_double("bandwidth_mbps");
  const double latency_us = params.get_double("latency_us");
  const auto max_inflight = params.get_int<unsigned>("max_inflight");
  unknown_params = params.unused();
  std::unique_ptr<sdk::StorageBackend> wrapped;
  if (sdk::Status made = inner.create(args.host, "throttle", wrapped); !made.ok()) return made;
  auto device = std::make_shared<Device>(mbps * 1e6, latency_us * 1e-6, max_inflight);
  out = std::make_unique<ThrottleBackend>(std::move(wrapped), std::move(device));
  return sdk::Status::success();
}

}  // namespace k3::storage::throttle

K3_PLUGIN(storage, "throttle", "1.0.0", k3::storage::throttle::create, nullptr)
K3_PLUGIN_PARAMS(k3::storage::throttle::kParams)
