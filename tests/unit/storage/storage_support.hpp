// Storage test support: the posix backend loaded through k3::PluginHost, temporary files,
// and a batch helper.
#pragma once
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <k3/plugin_host.hpp>

namespace k3test {

inline k3::PluginHost& plugin_host() {
  static k3::PluginHost host;
  return host;
}

inline std::shared_ptr<k3::sdk::StorageBackend> posix_backend() { return plugin_host().create_storage("posix", {}); }

/// A fresh directory under $K3_TEST_TMP (set by ctest) or the system temp dir, removed at
/// scope exit.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("K3_TEST_TMP");
    const std::filesystem::path root = base != nullptr ? base : std::filesystem::temp_directory_path().string();
    static std::atomic<int> counter{0};
    path_ = root / ("storage-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::vector<std::byte> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng() & 0xFF);
  return out;
}

inline void write_file(const std::filesystem::path& path, const std::vector<std::byte>& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

/// Opens `path` with `backend`, failing the test with the status detail if it cannot.
inline std::unique_ptr<k3::sdk::StorageFile> open_file(k3::sdk::StorageBackend& backend, const std::string& path) {
  std::unique_ptr<k3::sdk::StorageFile> file;
  const k3::sdk::Status st = backend.open(path, file);
  if (!st.ok()) throw std::runtime_error("open failed: " + st.detail);
  return file;
}

/// A request with its own destination buffer, pre-filled with a pattern so untouched
/// bytes are visible.
struct OwnedRequest {
  std::vector<std::byte> buffer;
  k3::sdk::ReadRequest request;
  OwnedRequest(std::uint64_t offset, std::uint64_t length)
      : buffer(length, std::byte{0xA5}), request{offset, length, buffer.data(), k3::sdk::StatusCode::internal} {}
};

/// Reads a batch of owned requests in one call.
inline k3::sdk::Status read_batch(k3::sdk::StorageFile& file, std::vector<OwnedRequest>& owned) {
  std::vector<k3::sdk::ReadRequest> batch;
  for (auto& o : owned) batch.push_back(o.request);
  const k3::sdk::Status st = file.read(batch);
  for (std::size_t i = 0; i < owned.size(); ++i) owned[i].request.result = batch[i].result;
  return st;
}

}  // namespace k3test
