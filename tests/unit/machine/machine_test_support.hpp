// A fake machine root for the probes (k3/machine.hpp): a fresh folder per test under
// $K3_TEST_TMP, with put() writing files at paths like "proc/meminfo".
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace k3::test {

class FakeRoot {
 public:
  explicit FakeRoot(const std::string& name) {
    const char* env = std::getenv("K3_TEST_TMP");
    const std::filesystem::path base = env != nullptr ? env : std::filesystem::path(K3_BINARY_DIR) / "test-tmp";
    path_ = base / ("machine-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~FakeRoot() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  FakeRoot(const FakeRoot&) = delete;
  FakeRoot& operator=(const FakeRoot&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  void put(const std::string& rel, const std::string& text) const {
    const auto file = path_ / rel;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace k3::test
