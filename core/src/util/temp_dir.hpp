// A folder written beside its final place and renamed into it: make-model and pack-trunk
// write whole folders this way, so a reader (or a crash) sees the old folder or the new one.
//
// The temporary folder is "<parent>/.<name>.k3tmp.<pid>.<random>". Unless committed it is
// removed with everything in it. A process killed with -9 cannot remove its own, so each
// new TempDir for a target first removes that target's temporaries whose writer process is
// gone: the name says which process wrote it.
#pragma once
#include <filesystem>
#include <functional>

namespace k3 {

class TempDir {
 public:
  /// Creates the temporary folder for `target` (mode 0755) after removing stale ones.
  /// RuntimeError naming the parent when it cannot be created.
  explicit TempDir(const std::filesystem::path& target);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

  /// fsyncs the folder, then renames it over the target. An existing target is moved aside
  /// first and removed after, but only when `replaceable(target)` says it may be (UsageError
  /// otherwise, nothing changed); an empty folder always may. Calling it twice is an error.
  void commit(const std::function<bool(const std::filesystem::path&)>& replaceable);

 private:
  std::filesystem::path target_, path_;
  bool committed_ = false;
};

/// Removes "<parent>/.<name>.k3tmp.<pid>.*" folders of `target` whose process is gone;
/// the number removed.
int remove_stale_temporaries(const std::filesystem::path& target);

}  // namespace k3
