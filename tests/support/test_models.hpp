// Test helpers: synthetic checkpoints written on demand, one private copy per test process
// (ctest runs test cases as separate processes, possibly in parallel).
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include <k3/geometry.hpp>
#include <k3/make_model.hpp>

namespace k3::test {

/// A scratch directory private to this process, under the build tree.
inline std::filesystem::path scratch_dir() {
  const char* env = std::getenv("K3_TEST_TMP");
  std::filesystem::path base = env != nullptr ? env : (std::filesystem::path(K3_BINARY_DIR) / "test-tmp");
  base /= "p" + std::to_string(::getpid());
  std::filesystem::create_directories(base);
  return base;
}

/// configs/models/<geometry>.yaml written once per process (in the geometry's dtype mix,
/// or `mix`); returns the checkpoint dir.
inline const std::filesystem::path& test_model(const std::string& geometry, std::optional<DTypeMix> mix = {}) {
  static std::map<std::string, std::filesystem::path> made;
  const std::string key = geometry + (mix ? std::string("-") + to_string(*mix) : std::string());
  auto it = made.find(key);
  if (it != made.end()) return it->second;
  const std::filesystem::path dir = scratch_dir() / ("model-" + key);
  if (!std::filesystem::exists(dir / "config.json")) {
    MakeModelOptions opts;
    opts.out = dir;
    opts.force = true;
    opts.dtypes = mix;
    make_model(load_geometry((std::filesystem::path(K3_SOURCE_DIR) / "configs/models" / (geometry + ".yaml")).string()),
               opts);
  }
  return made.emplace(key, dir).first->second;
}

/// Removes this process's scratch directory at exit.
struct ScratchCleanup {
  ~ScratchCleanup() {
    std::error_code ec;
    std::filesystem::remove_all(scratch_dir(), ec);
  }
};

}  // namespace k3::test
