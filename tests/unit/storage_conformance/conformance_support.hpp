// Storage conformance support: every storage backend the plugin host finds, plus a few
// parameter variants (O_DIRECT through uring, a single reader thread, decorators stacked),
// each created through k3::PluginHost; guarded, aligned and unaligned destinations.
#pragma once
#include <unistd.h>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <k3/error.hpp>
#include <k3/plugin_host.hpp>

#include "../storage/storage_support.hpp"

namespace k3test {

struct BackendConfig {
  std::string label;  ///< shown in failures
  std::string plugin;
  k3::PluginParams params;
  bool maps_file = false;  ///< mmap: a file truncated after open raises SIGBUS (documented)
};

/// Every storage plugin with default parameters, then the variants worth covering.
inline std::vector<BackendConfig> all_backend_configs() {
  std::vector<BackendConfig> out;
  for (const auto& info : plugin_host().plugins())
    if (info.kind == k3::PluginKind::storage && info.name != "http" && info.name != "tiered")
      out.push_back({info.name, info.name, {}, info.name == "mmap"});
  // tiered needs a directory (one per process: blocks are keyed by URI and size, and every
  // test writes fresh files) and serves what it holds even after the file changes, so it
  // is not "maps_file" but, like mmap, cannot see a truncation of bytes it already holds.
  for (const auto& info : plugin_host().plugins())
    if (info.kind == k3::PluginKind::storage && info.name == "tiered") {
      const char* base = std::getenv("K3_TEST_TMP");
      const std::string dir = std::string(base != nullptr ? base : "/tmp") + "/tier-" + std::to_string(::getpid());
      out.push_back({"tiered over posix", "tiered", {{"inner", "posix"}, {"dir", dir}, {"block_kb", "4"}}});
      out.push_back({"tiered over direct, 1 MiB cap",
                     "tiered",
                     {{"inner", "direct"}, {"dir", dir + "-capped"}, {"block_kb", "64"}, {"max_mb", "1"}}});
    }
  out.push_back({"direct threads=1", "direct", {{"threads", "1"}}});
  out.push_back({"direct threads=4", "direct", {{"threads", "4"}}});
  out.push_back({"uring direct=true", "uring", {{"direct", "true"}}});
  out.push_back({"uring queue_depth=1", "uring", {{"queue_depth", "1"}}});
  out.push_back({"mmap advice=random", "mmap", {{"advice", "random"}}, true});
  out.push_back({"throttle over faulty over direct",
                 "throttle",
                 {{"inner", "faulty"},
                  {"inner.inner", "direct"},
                  {"inner.inner.threads", "3"},
                  {"bandwidth_mbps", "100000"},
                  {"latency_us", "5"},
                  {"max_inflight", "8"}}});
  out.push_back({"faulty over uring direct", "faulty", {{"inner", "uring"}, {"inner.direct", "true"}}});
  out.push_back({"throttle over mmap", "throttle", {{"inner", "mmap"}}, true});
  return out;
}

/// The backend, or nullptr after a WARN when this machine cannot run it (io_uring
/// disabled): a skip with its reason, never a pass.
inline std::shared_ptr<k3::sdk::StorageBackend> try_create(const BackendConfig& config) {
  try {
    return plugin_host().create_storage(config.plugin, config.params);
  } catch (const k3::UsageError& e) {
    const std::string what = e.what();
    if (what.find("io_uring is not available") != std::string::npos) {
      WARN("SKIPPED " << config.label << ": " << what);
      return nullptr;
    }
    throw;
  }
}

/// A destination with guard bytes on both sides, placed `shift` bytes past a 4096 boundary.
class GuardedBuffer {
 public:
  static constexpr std::size_t kGuard = 4096;
  GuardedBuffer(std::size_t length, std::size_t shift) : length_(length), shift_(shift) {
    const std::size_t total = kGuard + shift + length + kGuard;
    storage_.reset(static_cast<std::byte*>(std::aligned_alloc(4096, (total + 4095) / 4096 * 4096)));
    for (std::size_t i = 0; i < total; ++i) storage_[i] = std::byte{0x5A};
  }
  [[nodiscard]] std::byte* data() const { return storage_.get() + kGuard + shift_; }
  [[nodiscard]] std::size_t size() const { return length_; }
  /// True when no byte outside [data, data + size) was written.
  [[nodiscard]] bool guards_intact() const {
    for (std::size_t i = 0; i < kGuard + shift_; ++i)
      if (storage_[i] != std::byte{0x5A}) return false;
    for (std::size_t i = 0; i < kGuard; ++i)
      if (data()[length_ + i] != std::byte{0x5A}) return false;
    return true;
  }

 private:
  struct Free {
    void operator()(std::byte* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<std::byte[], Free> storage_;
  std::size_t length_;
  std::size_t shift_;
};

/// One request of a random batch: aligned or not, 0..1 MiB.
struct RandomRequest {
  std::uint64_t offset;
  std::uint64_t length;
  std::size_t shift;
};

inline RandomRequest random_request(std::mt19937_64& rng, std::uint64_t file_size) {
  const bool aligned = rng() % 2 == 0;
  std::uint64_t length = rng() % 4 == 0 ? rng() % 64 : rng() % ((std::uint64_t{1} << 20) + 1);
  if (aligned) length = length / 4096 * 4096;
  if (length > file_size) length = file_size;
  std::uint64_t offset = rng() % (file_size - length + 1);
  if (aligned) offset = offset / 4096 * 4096;
  const std::size_t shift = aligned ? 0 : static_cast<std::size_t>(rng() % 4096);
  return {offset, length, shift};
}

}  // namespace k3test
