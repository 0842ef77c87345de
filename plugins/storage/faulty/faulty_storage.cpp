// Storage `faulty`: wraps another backend and injects faults for tests: short reads, EIO
// and delays, chosen per request from (seed, offset, length) by fault_plan.hpp. With
// transient=true an injected fault hits only the first attempt of a request, so a retry of
// the same (offset, length) succeeds; otherwise it fails every time.
#include <charconv>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <k3/plugin.hpp>

#include "common/decorator.hpp"
#include "common/inner_backend.hpp"
#include "fault_plan.hpp"

namespace {

using k3::sdk::Status;
using k3::sdk::StatusCode;
namespace local = k3::storage::local;
namespace faulty = k3::storage::faulty;

struct Config {
  faulty::FaultParams faults;
  std::uint64_t delay_us = 1000;
  bool transient = true;
};

class FaultyFile final : public local::DecoratorFile {
 public:
  FaultyFile(std::string path, std::unique_ptr<k3::sdk::StorageFile> inner, std::shared_ptr<const Config> config)
      : DecoratorFile(std::move(inner)), path_(std::move(path)), config_(std::move(config)) {}

  Status read(std::span<k3::sdk::ReadRequest> batch) noexcept override {
    try {
      std::vector<Status> injected(batch.size());
      std::vector<k3::sdk::ReadRequest> passed;  // the requests the inner backend serves
      std::vector<std::size_t> passed_index;
      bool delay = false;
      for (std::size_t i = 0; i < batch.size(); ++i) {
        const auto& r = batch[i];
        const faulty::FaultDecision d = faulty::decide(config_->faults, r.offset, r.length);
        delay = delay || d.delay;
        if (d.fault != faulty::Fault::none && (d.permanent || first_attempt(r.offset, r.length))) {
          injected[i] =
              d.fault == faulty::Fault::eio
                  ? Status::error(StatusCode::io_error, path_ + ": read error at offset " + std::to_string(r.offset) +
                                                            ": injected EIO (faulty)")
                  : Status::error(StatusCode::short_read, path_ + ": short read at offset " + std::to_string(r.offset) +
                                                              ": got " + std::to_string(d.short_got) + " of " +
                                                              std::to_string(r.length) + " bytes (injected by faulty)");
          continue;
        }
        passed.push_back(r);
        passed_index.push_back(i);
      }
      if (delay) std::this_thread::sleep_for(std::chrono::microseconds(config_->delay_us));
      Status inner_status = passed.empty() ? Status::success() : inner().read(passed);
      for (std::size_t k = 0; k < passed.size(); ++k) batch[passed_index[k]].result = passed[k].result;
      // The first failure in batch order: an injected one, or the inner backend's.
      for (std::size_t i = 0; i < batch.size(); ++i) {
        if (!injected[i].ok()) {
          batch[i].result = injected[i].code;
        }
      }
      for (std::size_t i = 0; i < batch.size(); ++i) {
        if (!injected[i].ok()) return injected[i];
        if (batch[i].result != StatusCode::ok) return inner_status;
      }
      return Status::success();
    } catch (const std::exception& e) {
      return Status::error(StatusCode::out_of_memory, path_ + ": " + e.what());
    }
  }

 private:
  /// True the first time (offset, length) fails in transient mode; later attempts pass.
  bool first_attempt(std::uint64_t offset, std::uint64_t length) {
    if (!config_->transient) return true;
    const std::lock_guard lock(mutex_);
    return failed_once_.emplace(offset, length).second;
  }

  std::string path_;
  std::shared_ptr<const Config> config_;
  std::mutex mutex_;
  std::set<std::pair<std::uint64_t, std::uint64_t>> failed_once_;
};

class FaultyBackend final : public local::DecoratorBackend {
 public:
  FaultyBackend(std::unique_ptr<k3::sdk::StorageBackend> inner, std::shared_ptr<const Config> config)
      : DecoratorBackend(std::move(inner)), config_(std::move(config)) {}

 private:
  Status wrap(std::string_view uri, std::unique_ptr<k3::sdk::StorageFile> inner,
              std::unique_ptr<k3::sdk::StorageFile>& out) override {
    out = std::make_unique<FaultyFile>(std::string(uri), std::move(inner), config_);
    return Status::success();
  }

  std::shared_ptr<const Config> config_;
};

Status parse_offsets(std::string_view text, std::vector<std::uint64_t>& out) {
  while (!text.empty()) {
    const auto comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    std::uint64_t v = 0;
    const auto res = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || res.ec != std::errc{} || res.ptr != item.data() + item.size())
      return Status::error(StatusCode::invalid_argument,
                           "expected a comma-separated list of byte offsets, got '" + std::string(item) + "'");
    out.push_back(v);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return Status::success();
}

}  // namespace

namespace k3::storage::faulty {

constexpr k3::sdk::ParamDescriptor kParams[] = {
    local::inner_name("posix"),
    local::kInnerKeys,
    sdk::param::integer("seed", "0", "[0, )",
                        "selects the fault pattern (faults are a function of seed, offset and length)"),
    sdk::param::number("eio_rate", "0", "[0, 1]", "probability that a request fails with io_error"),
    sdk::param::number("short_read_rate", "0", "[0, 1]",
                       "probability that a request (not already EIO) is a short read"),
    sdk::param::number("delay_rate", "0", "[0, 1]",
                       "probability that a request is delayed; a batch with any delayed request sleeps delay_us once"),
    sdk::param::integer("delay_us", "1000", "[0, 10000000]", "the injected delay in microseconds"),
    sdk::param::string("fail_offsets", "",
                       "comma-separated byte offsets; a request whose range contains one always fails with io_error"),
    sdk::param::integer("fail_after_bytes", nullptr, "[0, )",
                        "a request reaching past this byte of the file always fails with io_error; unset = never"),
    sdk::param::boolean(
        "transient", "true",
        "a rate-drawn fault hits only the first attempt of a request (the retry succeeds); false: every "
        "attempt"),
};

sdk::Status create(const sdk::CreateArgs& args, std::unique_ptr<sdk::StorageBackend>& out,
                   std::vector<std::string>& unknown_params) {
  sdk::ParamReader params(args.params, kParams);
  if (!params.ok()) return params.status();
  auto config = std::make_shared<Config>();
  const local::InnerBackend inner(params);
  config->faults.seed = params.get_int<std::uint64_t>("seed");
  config->faults.short_read_rate = params.get_double("short_read_rate");
  config->faults.eio_rate = params.get_double("eio_rate");
  config->faults.delay_rate = params.get_double("delay_rate");
  config->delay_us = params.get_int<std::uint64_t>("delay_us");
  config->faults.fail_after_bytes = params.get_int<std::uint64_t>("fail_after_bytes", UINT64_MAX);
  config->transient = params.get_bool("transient");
  const std::string offsets = params.get_string("fail_offsets");
  unknown_params = params.unused();
  if (sdk::Status parsed = parse_offsets(offsets, config->faults.fail_offsets); !parsed.ok())
    return params.refuse("fail_offsets", parsed.detail);
  std::unique_ptr<sdk::StorageBackend> wrapped;
  if (sdk::Status made = inner.create(args.host, "faulty", wrapped); !made.ok()) return made;
  out = std::make_unique<FaultyBackend>(std::move(wrapped), std::move(config));
  return sdk::Status::success();
}

}  // namespace k3::storage::faulty

K3_PLUGIN(storage, "faulty", "1.0.0", k3::storage::faulty::create, nullptr)
K3_PLUGIN_PARAMS(k3::storage::faulty::kParams)
