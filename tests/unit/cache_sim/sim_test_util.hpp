// Helpers for the trace and simulator tests: a scratch folder under the build tree.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <string>

namespace sim_test {

inline std::filesystem::path scratch(const std::string& name) {
  const char* env = std::getenv("K3_TEST_TMP");
  const std::filesystem::path root = env != nullptr ? std::filesystem::path(env)
                                                    : std::filesystem::path(K3_BINARY_DIR) / "test-tmp";
  const std::filesystem::path dir = root / "cache_sim" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace sim_test
