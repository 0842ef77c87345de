// PluginHost: builds the search path and forwards to the shared Registry (registry.hpp),
// which does the scanning, the checks and the creation.
#include <k3/plugin_host.hpp>

#include <array>
#include <atomic>
#include <cstdlib>
#include <sstream>

#include <boost/dll/runtime_symbol_info.hpp>

#include "plugin_host/registry.hpp"

namespace k3 {

namespace fs = std::filesystem;

const char* to_string(PluginKind kind) noexcept {
  switch (kind) {
    case PluginKind::storage: return "storage";
    case PluginKind::cache: return "cache";
    case PluginKind::kernels: return "kernels";
    case PluginKind::tokenizer: return "tokenizer";
    case PluginKind::transport: return "transport";
  }
  return "?";
}

namespace {

std::vector<fs::path> split_path_list(const char* list) {
  std::vector<fs::path> out;
  if (list == nullptr) return out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ':'))
    if (!item.empty()) out.emplace_back(item);
  return out;
}

/// The plugin folder that belongs to this libk3core: <dir of libk3core>/k3host/plugins.
/// In the build tree that is build/lib/k3host/plugins, once installed <prefix>/<libdir>/...,
/// so a build never picks up an installed copy of itself (or the reverse).
fs::path core_plugin_dir() {
  // libk3core is often reached as <prefix>/bin/../lib through k3host's RPATH: show and
  // compare the resolved folder.
  const fs::path dir = fs::path(boost::dll::this_line_location()).parent_path() / "k3host" / "plugins";
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(dir, ec);
  return ec ? dir.lexically_normal() : resolved;
}

}  // namespace

struct PluginHost::Impl {
  std::shared_ptr<detail::Registry> registry;
  std::array<std::atomic<std::size_t>, 5> created{};  ///< per PluginKind

  template <class T>
  std::shared_ptr<T> counted(PluginKind kind, std::shared_ptr<T> object) {
    created[static_cast<std::size_t>(kind)].fetch_add(1, std::memory_order_relaxed);
    return object;
  }
};

PluginHost::PluginHost(std::vector<fs::path> extra_dirs) : impl_(std::make_unique<Impl>()) {
  std::vector<fs::path> search_path{core_plugin_dir()};
  for (auto& p : split_path_list(std::getenv("K3_PLUGIN_PATH"))) search_path.push_back(std::move(p));
  for (auto& p : extra_dirs) search_path.push_back(std::move(p));
  impl_->registry = std::make_shared<detail::Registry>(std::move(search_path));
}

PluginHost::~PluginHost() = default;

const std::vector<fs::path>& PluginHost::search_path() const noexcept { return impl_->registry->search_path(); }
const std::vector<PluginInfo>& PluginHost::plugins() const noexcept { return impl_->registry->plugins(); }
const std::vector<PluginProblem>& PluginHost::problems() const noexcept { return impl_->registry->problems(); }
sdk::HostServices& PluginHost::services() noexcept { return *impl_->registry; }
void PluginHost::set_stop_flag(const std::atomic<bool>* flag) noexcept { impl_->registry->set_stop_flag(flag); }
void PluginHost::set_file_storage(const std::shared_ptr<sdk::StorageBackend>& storage) {
  impl_->registry->set_file_storage(storage);
}

const PluginInfo& PluginHost::find(PluginKind kind, const std::string& name) const {
  return impl_->registry->find(kind, name);
}
std::size_t PluginHost::created(PluginKind kind) const noexcept {
  return impl_->created[static_cast<std::size_t>(kind)].load(std::memory_order_relaxed);
}

const PluginInfo& PluginHost::best_kernels() const { return impl_->registry->best_kernels(); }

std::shared_ptr<sdk::StorageBackend> PluginHost::create_storage(const std::string& name, const PluginParams& params,
                                                                std::vector<std::string>* unknown) {
  return impl_->counted(PluginKind::storage,
                        impl_->registry->create<sdk::StorageBackend>(PluginKind::storage, name, params, unknown));
}
std::shared_ptr<sdk::CachePolicy> PluginHost::create_cache(const std::string& name, const PluginParams& params,
                                                           std::vector<std::string>* unknown) {
  return impl_->counted(PluginKind::cache,
                        impl_->registry->create<sdk::CachePolicy>(PluginKind::cache, name, params, unknown));
}
std::shared_ptr<sdk::KernelSet> PluginHost::create_kernels(const std::string& name, const PluginParams& params,
                                                           std::vector<std::string>* unknown) {
  return impl_->counted(PluginKind::kernels,
                        impl_->registry->create<sdk::KernelSet>(PluginKind::kernels, name, params, unknown));
}
std::shared_ptr<sdk::Tokenizer> PluginHost::create_tokenizer(const std::string& name, const PluginParams& params,
                                                             std::vector<std::string>* unknown) {
  return impl_->counted(PluginKind::tokenizer,
                        impl_->registry->create<sdk::Tokenizer>(PluginKind::tokenizer, name, params, unknown));
}
std::shared_ptr<sdk::Transport> PluginHost::create_transport(const std::string& name, const PluginParams& params,
                                                             std::vector<std::string>* unknown) {
  return impl_->counted(PluginKind::transport,
                        impl_->registry->create<sdk::Transport>(PluginKind::transport, name, params, unknown));
}

}  // namespace k3
