#include <k3/plugin_host.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>

#include <k3/abi.hpp>
#include <k3/error.hpp>
#include <k3/log.hpp>
#include <k3/plugin.hpp>

namespace k3 {

namespace fs = std::filesystem;

const char* to_string(PluginKind kind) noexcept {
  switch (kind) {
    case PluginKind::storage: return "storage";
    case PluginKind::cache: return "cache";
    case PluginKind::kernels: return "kernels";
    case PluginKind::tokenizer: return "tokenizer";
  }
  return "?";
}

namespace {

bool parse_kind(std::string_view s, PluginKind& out) {
  for (PluginKind k : {PluginKind::storage, PluginKind::cache, PluginKind::kernels, PluginKind::tokenizer}) {
    if (s == to_string(k)) {
      out = k;
      return true;
    }
  }
  return false;
}

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
fs::path core_plugin_dir() {
  const fs::path lib = boost::dll::this_line_location();
  return lib.parent_path() / "k3host" / "plugins";
}

struct Library {
  boost::dll::shared_library lib;
  PluginInfo info;
};

}  // namespace

struct PluginHost::Impl final : sdk::HostServices {
  PluginHost* owner = nullptr;
  std::vector<fs::path> search_path;
  std::vector<PluginInfo> plugins;
  std::vector<PluginProblem> problems;
  // kind/name -> every file that declared it (more than one = duplicate)
  std::map<std::pair<PluginKind, std::string>, std::vector<fs::path>> declared;
  std::map<fs::path, std::shared_ptr<Library>> libraries;

  void log(sdk::LogLevel level, std::string_view component, std::string_view message) noexcept override {
    try {
      k3::log(level, component, message);
    } catch (...) {
    }
  }

  sdk::Status create_storage(std::string_view plugin, std::span<const sdk::Param> params,
                             std::unique_ptr<sdk::StorageBackend>& out) noexcept override {
    try {
      PluginParams p;
      for (const auto& kv : params) p.emplace_back(std::string(kv.key), std::string(kv.value));
      std::vector<std::string> unknown;
      auto shared = owner->create_storage(std::string(plugin), p, &unknown);
      if (!unknown.empty())
        return sdk::Status::error(sdk::StatusCode::invalid_argument,
                                  "storage plugin '" + std::string(plugin) + "' does not know parameter '" +
                                      unknown.front() + "'");
      // The library is loaded with RTLD_NODELETE, so handing out a unique_ptr that does
      // not hold a library reference is safe: the code stays mapped until exit.
      out = std::make_unique<SharedStorage>(std::move(shared));
      return sdk::Status::success();
    } catch (const std::exception& e) {
      return sdk::Status::error(sdk::StatusCode::invalid_argument, e.what());
    }
  }

  /// Adapts a shared backend to the unique_ptr the SDK hands to decorators.
  class SharedStorage final : public sdk::StorageBackend {
   public:
    explicit SharedStorage(std::shared_ptr<sdk::StorageBackend> inner) : inner_(std::move(inner)) {}
    sdk::Status open(std::string_view uri, std::unique_ptr<sdk::StorageFile>& out) noexcept override {
      return inner_->open(uri, out);
    }

   private:
    std::shared_ptr<sdk::StorageBackend> inner_;
  };

  void scan_dir(const fs::path& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string fname = entry.path().filename().string();
      if (fname.rfind("k3-", 0) == 0 && entry.path().extension() == ".so") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) scan_file(f);
  }

  void refuse(const fs::path& path, std::string reason) { problems.push_back({path, std::move(reason)}); }

  void scan_file(const fs::path& path) {
    const fs::path canonical = fs::weakly_canonical(path);
    if (libraries.count(canonical) != 0) return;  // the same file reached twice via the path
    auto lib = std::make_shared<Library>();
    try {
      // RTLD_NODELETE: the code of a plugin stays mapped until the process exits, whatever
      // happens to handles, so no object can outlive its vtable.
      const auto mode = static_cast<boost::dll::load_mode::type>(RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
      lib->lib.load(canonical, mode);
    } catch (const std::exception& e) {
      refuse(path, std::string("cannot be loaded: ") + e.what());
      return;
    }
    if (!lib->lib.has("k3_plugin_descriptor")) {
      refuse(path, "has no k3_plugin_descriptor symbol: not a k3host plugin (build it with K3_PLUGIN)");
      return;
    }
    const K3PluginDescriptor& d = lib->lib.get_alias<const K3PluginDescriptor>("k3_plugin_descriptor");
    if (d.abi != K3_PLUGIN_ABI) {
      refuse(path, "incompatible plugin ABI (plugin: " + std::to_string(d.abi) +
                       ", host: " + std::to_string(K3_PLUGIN_ABI) + "); rebuild it against this SDK");
      return;
    }
    const char* toolchain = d.toolchain != nullptr ? d.toolchain : "";
    if (std::strcmp(toolchain, K3_TOOLCHAIN) != 0) {
      refuse(path, std::string("incompatible toolchain (plugin: ") + toolchain + ", host: " + K3_TOOLCHAIN + ")");
      return;
    }
    PluginInfo info;
    if (d.kind == nullptr || !parse_kind(d.kind, info.kind)) {
      refuse(path, std::string("declares unknown kind '") + (d.kind ? d.kind : "") +
                       "' (expected storage, cache, kernels or tokenizer)");
      return;
    }
    info.name = d.name != nullptr ? d.name : "";
    info.version = d.version != nullptr ? d.version : "";
    info.path = path;
    info.abi = d.abi;
    const std::string expected = std::string("k3-") + to_string(info.kind) + "-" + info.name + ".so";
    if (info.name.empty() || path.filename().string() != expected) {
      refuse(path, "declares kind '" + std::string(to_string(info.kind)) + "' and name '" + info.name +
                       "', so its file must be named " + expected);
      return;
    }
    if (!lib->lib.has("k3_plugin_create")) {
      refuse(path, "has a descriptor but no k3_plugin_create factory");
      return;
    }
    info.score = d.score != nullptr ? d.score() : 1;
    lib->info = info;
    libraries.emplace(canonical, lib);
    declared[{info.kind, info.name}].push_back(path);
    plugins.push_back(info);
  }

  std::shared_ptr<Library> library_for(const PluginInfo& info) {
    return libraries.at(fs::weakly_canonical(info.path));
  }

  template <class Kind>
  std::shared_ptr<typename Kind::Interface> create(PluginKind kind, const std::string& name,
                                                   const PluginParams& params, std::vector<std::string>* unknown) {
    using Interface = typename Kind::Interface;
    const PluginInfo& info = owner->find(kind, name);
    auto lib = library_for(info);
    auto& factory = lib->lib.template get_alias<sdk::Factory<Interface>>("k3_plugin_create");
    std::vector<sdk::Param> view;
    view.reserve(params.size());
    for (const auto& [k, v] : params) view.push_back({k, v});
    sdk::CreateArgs args{view, this};
    std::unique_ptr<Interface> obj;
    std::vector<std::string> unknown_keys;
    const sdk::Status st = factory(args, obj, unknown_keys);
    const std::string who = std::string(to_string(kind)) + " plugin '" + name + "' (" + info.path.string() + ")";
    if (!st.ok()) throw UsageError(who + ": " + st.detail);
    if (!obj) throw RuntimeError(who + ": factory returned success but no object");
    if (!unknown_keys.empty()) {
      if (unknown == nullptr) throw UsageError(who + ": unknown parameter '" + unknown_keys.front() + "'");
      *unknown = std::move(unknown_keys);
    }
    // Holder keeps the library referenced for as long as the object lives; the object is
    // destroyed first (declared last).
    struct Holder {
      std::shared_ptr<Library> library;
      std::unique_ptr<Interface> object;
    };
    auto holder = std::make_shared<Holder>(Holder{std::move(lib), std::move(obj)});
    return std::shared_ptr<Interface>(holder, holder->object.get());
  }
};

PluginHost::PluginHost(std::vector<fs::path> extra_dirs) : impl_(std::make_unique<Impl>()) {
  impl_->owner = this;
  impl_->search_path.push_back(core_plugin_dir());
  for (auto& p : split_path_list(std::getenv("K3_PLUGIN_PATH"))) impl_->search_path.push_back(std::move(p));
  for (auto& p : extra_dirs) impl_->search_path.push_back(std::move(p));
  for (const auto& dir : impl_->search_path) impl_->scan_dir(dir);
}

PluginHost::~PluginHost() = default;

const std::vector<fs::path>& PluginHost::search_path() const noexcept { return impl_->search_path; }
const std::vector<PluginInfo>& PluginHost::plugins() const noexcept { return impl_->plugins; }
const std::vector<PluginProblem>& PluginHost::problems() const noexcept { return impl_->problems; }
sdk::HostServices& PluginHost::services() noexcept { return *impl_; }

const PluginInfo& PluginHost::find(PluginKind kind, const std::string& name) const {
  const std::string what = std::string(to_string(kind)) + " plugin '" + name + "'";
  const auto it = impl_->declared.find({kind, name});
  if (it != impl_->declared.end() && it->second.size() > 1) {
    std::string files;
    for (const auto& p : it->second) files += (files.empty() ? "" : ", ") + p.string();
    throw UsageError(what + " is defined by more than one library: " + files +
                     "; remove all but one from the plugin search path");
  }
  if (it == impl_->declared.end()) {
    std::string msg = what + " not found";
    // Did the name exist under another kind?
    for (const auto& info : impl_->plugins)
      if (info.name == name)
        msg += "; '" + name + "' is a " + to_string(info.kind) + " plugin (" + info.path.string() + ")";
    const std::string file = std::string("k3-") + to_string(kind) + "-" + name + ".so";
    for (const auto& pr : impl_->problems)
      if (pr.path.filename() == file) msg += "; " + pr.path.string() + " was refused: " + pr.reason;
    std::string dirs;
    for (const auto& d : impl_->search_path) dirs += (dirs.empty() ? "" : ":") + d.string();
    throw UsageError(msg + " (searched " + dirs + ")");
  }
  for (const auto& info : impl_->plugins) {
    if (info.kind == kind && info.name == name) {
      if (kind == PluginKind::kernels && info.score <= 0)
        throw UsageError(what + " (" + info.path.string() + ") cannot run on this CPU (score 0)");
      return info;
    }
  }
  throw RuntimeError(what + ": plugin registry is inconsistent");
}

const PluginInfo& PluginHost::best_kernels() const {
  const PluginInfo* best = nullptr;
  for (const auto& info : impl_->plugins)
    if (info.kind == PluginKind::kernels && info.score > 0 && (best == nullptr || info.score > best->score))
      best = &info;
  if (best == nullptr) throw UsageError("no kernel set on the plugin search path can run on this CPU");
  return *best;
}

std::shared_ptr<sdk::StorageBackend> PluginHost::create_storage(const std::string& name, const PluginParams& params,
                                                                std::vector<std::string>* unknown) {
  return impl_->create<sdk::kind::storage>(PluginKind::storage, name, params, unknown);
}
std::shared_ptr<sdk::CachePolicy> PluginHost::create_cache(const std::string& name, const PluginParams& params,
                                                           std::vector<std::string>* unknown) {
  return impl_->create<sdk::kind::cache>(PluginKind::cache, name, params, unknown);
}
std::shared_ptr<sdk::KernelSet> PluginHost::create_kernels(const std::string& name, const PluginParams& params,
                                                           std::vector<std::string>* unknown) {
  return impl_->create<sdk::kind::kernels>(PluginKind::kernels, name, params, unknown);
}
std::shared_ptr<sdk::Tokenizer> PluginHost::create_tokenizer(const std::string& name, const PluginParams& params,
                                                             std::vector<std::string>* unknown) {
  return impl_->create<sdk::kind::tokenizer>(PluginKind::tokenizer, name, params, unknown);
}

}  // namespace k3
