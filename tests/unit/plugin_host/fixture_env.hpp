// Helpers for the plugin-host tests: where the fixture plugins are built, and an RAII
// guard that sets (or clears) K3_PLUGIN_PATH for one test and restores it afterwards.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

namespace k3::test {

/// test-plugins/<case>/ under the build tree (tests/fixtures/CMakeLists.txt).
inline std::filesystem::path fixture_dir(const std::string& test_case) {
  return std::filesystem::path(K3_BINARY_DIR) / "test-plugins" / test_case;
}

/// The file a fixture plugin is built to.
inline std::filesystem::path fixture_file(const std::string& test_case, const std::string& kind,
                                          const std::string& name) {
  return fixture_dir(test_case) / ("k3-" + kind + "-" + name + ".so");
}

class ScopedPluginPath {
 public:
  explicit ScopedPluginPath(const std::optional<std::string>& value) {
    if (const char* old = std::getenv("K3_PLUGIN_PATH")) saved_ = old;
    if (value)
      ::setenv("K3_PLUGIN_PATH", value->c_str(), 1);
    else
      ::unsetenv("K3_PLUGIN_PATH");
  }
  ~ScopedPluginPath() {
    if (saved_)
      ::setenv("K3_PLUGIN_PATH", saved_->c_str(), 1);
    else
      ::unsetenv("K3_PLUGIN_PATH");
  }
  ScopedPluginPath(const ScopedPluginPath&) = delete;
  ScopedPluginPath& operator=(const ScopedPluginPath&) = delete;

 private:
  std::optional<std::string> saved_;
};

}  // namespace k3::test
