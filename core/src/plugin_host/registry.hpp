// The plugin registry behind PluginHost: the scanned libraries, the refusals, the factories,
// and the HostServices every plugin object is handed.
//
// It is shared-owned: PluginHost holds one reference and every object it creates holds
// another, so a plugin that keeps its HostServices pointer (a decorator creating its inner
// backend late, a plugin that logs from its destructor) can use it after the PluginHost is
// gone. Nothing in the registry holds a plugin object, so there is no reference cycle.
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/dll/shared_library.hpp>

#include <k3/plugin_host.hpp>

namespace k3::detail {

/// One loaded, accepted library.
struct LoadedLibrary {
  boost::dll::shared_library lib;
  PluginInfo info;
};

/// The HostServices one plugin object receives: the registry's, with the object's
/// "<kind>/<name>" put in front of its log lines. Shares ownership of the registry.
class PluginServices final : public sdk::HostServices {
 public:
  PluginServices(std::shared_ptr<sdk::HostServices> registry, std::string prefix)
      : registry_(std::move(registry)), prefix_(std::move(prefix)) {}
  void log(sdk::LogLevel level, std::string_view component, std::string_view message) noexcept override;
  sdk::Status create_storage(std::string_view plugin, std::span<const sdk::Param> params,
                             std::unique_ptr<sdk::StorageBackend>& out) noexcept override {
    return registry_->create_storage(plugin, params, out);
  }
  sdk::Status read_file(std::string_view uri, std::uint64_t max_bytes, std::string& out) noexcept override {
    return registry_->read_file(uri, max_bytes, out);
  }

 private:
  std::shared_ptr<sdk::HostServices> registry_;
  std::string prefix_;
};

class Registry final : public sdk::HostServices, public std::enable_shared_from_this<Registry> {
 public:
  /// Scans `search_path` in order; unusable libraries land in problems().
  explicit Registry(std::vector<std::filesystem::path> search_path);

  [[nodiscard]] const std::vector<std::filesystem::path>& search_path() const noexcept { return search_path_; }
  [[nodiscard]] const std::vector<PluginInfo>& plugins() const noexcept { return plugins_; }
  [[nodiscard]] const std::vector<PluginProblem>& problems() const noexcept { return problems_; }

  /// See PluginHost::find / best_kernels.
  [[nodiscard]] const PluginInfo& find(PluginKind kind, const std::string& name) const;
  [[nodiscard]] const PluginInfo& best_kernels() const;

  /// Creates an object through the plugin's factory. `Interface` must match `kind`.
  template <class Interface>
  std::shared_ptr<Interface> create(PluginKind kind, const std::string& name, const PluginParams& params,
                                    std::vector<std::string>* unknown);

  // sdk::HostServices
  void log(sdk::LogLevel level, std::string_view component, std::string_view message) noexcept override;
  sdk::Status create_storage(std::string_view plugin, std::span<const sdk::Param> params,
                             std::unique_ptr<sdk::StorageBackend>& out) noexcept override;
  sdk::Status read_file(std::string_view uri, std::uint64_t max_bytes, std::string& out) noexcept override;

  /// See PluginHost::set_file_storage.
  void set_file_storage(const std::shared_ptr<sdk::StorageBackend>& storage);

 private:
  void scan_dir(const std::filesystem::path& dir);
  void scan_file(const std::filesystem::path& path);
  void refuse(const std::filesystem::path& path, std::string reason);
  [[nodiscard]] const std::shared_ptr<LoadedLibrary>& library_of(const PluginInfo& info) const;

  std::vector<std::filesystem::path> search_path_;
  std::vector<PluginInfo> plugins_;                       // accepted, in search-path order
  std::vector<std::shared_ptr<LoadedLibrary>> libraries_;  // parallel to plugins_
  std::vector<PluginProblem> problems_;
  // kind/name -> every file that declared it (more than one = duplicate)
  std::map<std::pair<PluginKind, std::string>, std::vector<std::filesystem::path>> declared_;
  std::vector<std::filesystem::path> seen_;  // canonical paths already scanned
  // The backend read_file() reads through. Weak: the backend holds the registry (its
  // HostServices), so a strong reference here would be a cycle.
  std::weak_ptr<sdk::StorageBackend> file_storage_;
  std::mutex file_storage_mutex_;
  std::mutex file_read_mutex_;
};

}  // namespace k3::detail
