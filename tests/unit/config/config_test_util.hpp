// Helpers for the pipeline tests: a scratch folder of YAML files, the position of a piece
// of text (computed from the text itself, not by the loader), and catching UsageErrors.
#pragma once
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <k3/error.hpp>
#include <k3/pipeline.hpp>

namespace k3test {

namespace fs = std::filesystem;

/// A fresh folder under $K3_TEST_TMP (or the system temp folder), removed afterwards.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("K3_TEST_TMP");
    const fs::path root = base != nullptr ? fs::path(base) : fs::temp_directory_path();
    fs::create_directories(root);
    std::string pattern = (root / "config-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed under " + root.string());
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const fs::path& path() const { return path_; }
  /// Writes `text` to path()/name (creating folders) and returns the full path.
  fs::path write(const std::string& name, const std::string& text) const {
    const fs::path file = path_ / name;
    fs::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }

 private:
  fs::path path_;
};

/// "file:line:col" of the first occurrence of `needle` in `text` (1-based line and column).
inline std::string pos(const fs::path& file, const std::string& text, const std::string& needle) {
  const std::size_t at = text.find(needle);
  REQUIRE(at != std::string::npos);
  int line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return file.string() + ":" + std::to_string(line) + ":" + std::to_string(at - line_start + 1);
}

/// The message of the k3::UsageError `f` throws (a test failure if it throws nothing else).
inline std::string usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const k3::UsageError& e) {
    CHECK(e.code() == k3::ExitCode::usage);
    return e.what();
  }
  FAIL("expected a k3::UsageError");
  return {};
}

/// Sets an environment variable for the lifetime of the object (unset afterwards).
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const char* value) : name_(std::move(name)) {
    if (value == nullptr) {
      unsetenv(name_.c_str());
    } else {
      setenv(name_.c_str(), value, 1);
    }
  }
  ~ScopedEnv() { unsetenv(name_.c_str()); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
};

inline fs::path source_dir() { return fs::path(K3_SOURCE_DIR); }

}  // namespace k3test
