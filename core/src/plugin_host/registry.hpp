// The plugin registry behind PluginHost: the scanned libraries, the refusals, the factories,
// and the HostServices every plugin object is handed.
//
// It is shared-owned: PluginHost holds one reference and every object it creates holds
// another, so a plugin that keeps its HostServices pointer (a decorator creating its inner
// backend late, a plugin that logs from its destructor) can use it after the PluginHost is
// gone. Nothing in the registry holds a plugin object, so there is no reference cycle.
#pragma once
#include <atomic>
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
  [[nodiscard]] bool stop_requested() const noexcept override { return registry_->stop_requested(); }

 private:
  std::shared_ptr<sdk::HostServices> registry_;
  std::string prefix_;
};

class Registry final : public sdk::HostServices, public std::enable_shared_from_this<Registry> {
 public:
  /// Scans `search_path` in order without loading anything: a library's kind and name come
  /// from its file name (k3-<kind>-<name>.so), so only the libraries a run asks for are ever
  /// opened and run their constructors. Folders and files others may write are refused.
  explicit Registry(std::vector<std::filesystem::path> search_path);

  [[nodiscard]] const std::vector<std::filesystem::path>& search_path() const noexcept { return search_path_; }
  /// Loads and checks every library on the path (for `k3host plugins`).
  [[nodiscard]] const std::vector<PluginInfo>& plugins() noexcept;
  [[nodiscard]] const std::vector<PluginProblem>& problems() noexcept;

  /// See PluginHost::find / best_kernels. Load only the libraries they need.
  [[nodiscard]] const PluginInfo& find(PluginKind kind, const std::string& name);
  [[nodiscard]] const PluginInfo& best_kernels();

  /// Creates an object through the plugin's factory. `Interface` must match `kind`.
  template <class Interface>
  std::shared_ptr<Interface> create(PluginKind kind, const std::string& name, const PluginParams& params,
                                    std::vector<std::string>* unknown);

  // sdk::HostServices
  void log(sdk::LogLevel level, std::string_view component, std::string_view message) noexcept override;
  sdk::Status create_storage(std::string_view plugin, std::span<const sdk::Param> params,
                             std::unique_ptr<sdk::StorageBackend>& out) noexcept override;
  sdk::Status read_file(std::string_view uri, std::uint64_t max_bytes, std::string& out) noexcept override;
  [[nodiscard]] bool stop_requested() const noexcept override {
    const std::atomic<bool>* flag = stop_flag_.load();
    return flag != nullptr && flag->load(std::memory_order_relaxed);
  }

  /// See PluginHost::set_stop_flag.
  void set_stop_flag(const std::atomic<bool>* flag) noexcept { stop_flag_.store(flag); }
  /// See PluginHost::set_file_storage.
  void set_file_storage(const std::shared_ptr<sdk::StorageBackend>& storage);

 private:
  /// A library file on the path, named k3-<kind>-<name>.so; opened on first use.
  struct Candidate {
    PluginKind kind{};
    std::string name;
    std::filesystem::path path;
    bool loaded = false;
    std::string refusal;  ///< non-empty: refused (at the scan or when loaded), with the reason
    PluginInfo info;      ///< valid when loaded and not refused
    std::shared_ptr<LoadedLibrary> library;
  };

  void scan_dir(const std::filesystem::path& dir);
  /// Opens the library and checks its descriptor against its file name (once).
  void load(Candidate& c) noexcept;
  void load_all() noexcept;
  [[nodiscard]] Candidate& candidate_of(const PluginInfo& info);

  std::vector<std::filesystem::path> search_path_;
  std::vector<Candidate> candidates_;         // search-path order; fixed after the scan
  std::vector<PluginProblem> scan_problems_;  // files and folders refused without a candidate
  std::vector<PluginInfo> plugins_;           // accepted, rebuilt by plugins()
  std::vector<PluginProblem> problems_;       // rebuilt by problems()
  // kind/name -> every file that declares it by name (more than one = duplicate)
  std::map<std::pair<PluginKind, std::string>, std::vector<std::size_t>> declared_;
  std::vector<std::filesystem::path> seen_;  // canonical paths already scanned
  // The backend read_file() reads through. Weak: the backend holds the registry (its
  // HostServices), so a strong reference here would be a cycle.
  std::weak_ptr<sdk::StorageBackend> file_storage_;
  std::mutex file_storage_mutex_;
  std::mutex file_read_mutex_;
  std::atomic<const std::atomic<bool>*> stop_flag_{nullptr};  // what stop_requested() reads
};

}  // namespace k3::detail
