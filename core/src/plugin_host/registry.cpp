#include "plugin_host/registry.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include <k3/abi.hpp>
#include <k3/error.hpp>
#include <k3/log.hpp>
#include <k3/plugin.hpp>

#include "io/small_file.hpp"

namespace k3::detail {

namespace fs = std::filesystem;

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

/// Boost.DLL wraps dlerror() in its own words; keep only what the dynamic loader said.
std::string load_failure(const std::exception& e) {
  const std::string what = e.what();
  const std::string marker = "dlerror system message: ";
  const auto at = what.find(marker);
  if (at == std::string::npos) return what;
  std::string text = what.substr(at + marker.size());
  if (!text.empty() && text.back() == ')') text.pop_back();
  return text;
}

/// Status codes that mean "the configuration asks for something impossible" are usage
/// errors (exit 2); the rest are failures while running (exit 1).
bool is_usage_status(sdk::StatusCode code) {
  return code == sdk::StatusCode::invalid_argument || code == sdk::StatusCode::not_found ||
         code == sdk::StatusCode::unsupported;
}

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : separator) + s;
  return out;
}

/// Storage decorators create their inner backend through HostServices; a decorator
/// configured to wrap itself would otherwise recurse until the stack runs out.
constexpr int kMaxStorageNesting = 8;
thread_local int storage_nesting = 0;

/// Adapts a shared backend (which keeps its library and the registry alive) to the
/// unique_ptr the SDK hands to decorators.
class NestedStorage final : public sdk::StorageBackend {
 public:
  explicit NestedStorage(std::shared_ptr<sdk::StorageBackend> inner) : inner_(std::move(inner)) {}
  sdk::Status open(std::string_view uri, std::unique_ptr<sdk::StorageFile>& out) noexcept override {
    return inner_->open(uri, out);
  }
  sdk::Status list(std::string_view uri, std::vector<std::string>& names) noexcept override {
    return inner_->list(uri, names);
  }

 private:
  std::shared_ptr<sdk::StorageBackend> inner_;
};

}  // namespace

Registry::Registry(std::vector<fs::path> search_path) : search_path_(std::move(search_path)) {
  for (const auto& dir : search_path_) scan_dir(dir);
}

void Registry::scan_dir(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  std::vector<fs::path> files;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string fname = it->path().filename().string();
    if (fname.rfind("k3-", 0) == 0 && it->path().extension() == ".so") files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) scan_file(f);
}

void Registry::refuse(const fs::path& path, std::string reason) { problems_.push_back({path, std::move(reason)}); }

void Registry::scan_file(const fs::path& path) {
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(path, ec);
  const fs::path& key = ec ? path : canonical;
  if (std::find(seen_.begin(), seen_.end(), key) != seen_.end()) return;  // reached twice via the path
  seen_.push_back(key);

  auto loaded = std::make_shared<LoadedLibrary>();
  try {
    // RTLD_NODELETE: a plugin's code stays mapped until the process exits, whatever happens
    // to handles, so no object (nor a thread it left running) can outlive its code.
    const auto mode = static_cast<boost::dll::load_mode::type>(RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    loaded->lib.load(key, mode);
  } catch (const std::exception& e) {
    refuse(path, "cannot be loaded: " + load_failure(e));
    return;
  }
  if (!loaded->lib.has("k3_plugin_descriptor")) {
    refuse(path, "has no k3_plugin_descriptor symbol: not a k3host plugin (build it with K3_PLUGIN)");
    return;
  }
  // The ABI number is read first and alone: it is the only field guaranteed to mean the
  // same thing in every version of the descriptor.
  const auto& d = loaded->lib.get_alias<const K3PluginDescriptor>("k3_plugin_descriptor");
  if (d.abi != K3_PLUGIN_ABI) {
    refuse(path, "incompatible plugin ABI (plugin: " + std::to_string(d.abi) +
                     ", host: " + std::to_string(K3_PLUGIN_ABI) + "); rebuild it against this SDK");
    return;
  }
  const char* toolchain = d.toolchain != nullptr ? d.toolchain : "";
  if (std::strcmp(toolchain, K3_TOOLCHAIN) != 0) {
    refuse(path, std::string("incompatible toolchain (plugin: ") + toolchain + ", host: " + K3_TOOLCHAIN +
                     "); rebuild it with the host's compiler and C++ standard library");
    return;
  }
  PluginInfo info;
  if (d.kind == nullptr || !parse_kind(d.kind, info.kind)) {
    refuse(path, std::string("declares unknown kind '") + (d.kind != nullptr ? d.kind : "") +
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
  if (!loaded->lib.has("k3_plugin_create")) {
    refuse(path, "has a descriptor but no k3_plugin_create factory (build it with K3_PLUGIN)");
    return;
  }
  info.score = 1;
  if (d.score != nullptr) {
    try {
      info.score = d.score();
    } catch (...) {
      refuse(path, "its score() function threw an exception");
      return;
    }
  }
  auto& files = declared_[{info.kind, info.name}];
  files.push_back(path);
  if (files.size() > 1) {
    // find() refuses the name while both are on the path; listing the second file here
    // makes `k3host plugins` show the clash too.
    refuse(path, std::string(to_string(info.kind)) + " plugin '" + info.name + "' is already defined by " +
                     files.front().string() + "; remove all but one from the plugin search path");
    return;
  }
  loaded->info = info;
  plugins_.push_back(info);
  libraries_.push_back(std::move(loaded));
}

const PluginInfo& Registry::find(PluginKind kind, const std::string& name) const {
  const std::string what = std::string(to_string(kind)) + " plugin '" + name + "'";
  const auto it = declared_.find({kind, name});
  if (it != declared_.end() && it->second.size() > 1) {
    std::vector<std::string> files;
    for (const auto& p : it->second) files.push_back(p.string());
    throw UsageError(what + " is defined by more than one library: " + join(files, ", ") +
                     "; remove all but one from the plugin search path");
  }
  if (it == declared_.end()) {
    std::string msg = what + " not found";
    for (const auto& info : plugins_)
      if (info.name == name)
        msg += "; '" + name + "' is a " + to_string(info.kind) + " plugin (" + info.path.string() + ")";
    const std::string file = std::string("k3-") + to_string(kind) + "-" + name + ".so";
    for (const auto& pr : problems_)
      if (pr.path.filename() == file) msg += "; " + pr.path.string() + " was refused: " + pr.reason;
    std::vector<std::string> dirs;
    for (const auto& d : search_path_) dirs.push_back(d.string());
    throw UsageError(msg + " (searched " + join(dirs, ":") + ")");
  }
  for (const auto& info : plugins_) {
    if (info.kind == kind && info.name == name) {
      if (kind == PluginKind::kernels && info.score <= 0)
        throw UsageError(what + " (" + info.path.string() + ") cannot run on this CPU (score " +
                         std::to_string(info.score) + ")");
      return info;
    }
  }
  throw RuntimeError(what + ": plugin registry is inconsistent");
}

const PluginInfo& Registry::best_kernels() const {
  const PluginInfo* best = nullptr;
  for (const auto& info : plugins_)
    if (info.kind == PluginKind::kernels && info.score > 0 && (best == nullptr || info.score > best->score))
      best = &info;
  if (best == nullptr) throw UsageError("no kernel set on the plugin search path can run on this CPU");
  return *best;
}

const std::shared_ptr<LoadedLibrary>& Registry::library_of(const PluginInfo& info) const {
  // `info` is an element of plugins_ (find() returns references into it).
  const auto index = static_cast<std::size_t>(&info - plugins_.data());
  return libraries_.at(index);
}

template <class Interface>
std::shared_ptr<Interface> Registry::create(PluginKind kind, const std::string& name, const PluginParams& params,
                                            std::vector<std::string>* unknown) {
  const PluginInfo& info = find(kind, name);
  std::shared_ptr<LoadedLibrary> library = library_of(info);
  auto& factory = library->lib.template get_alias<sdk::Factory<Interface>>("k3_plugin_create");

  std::vector<sdk::Param> view;
  view.reserve(params.size());
  for (const auto& [k, v] : params) view.push_back({k, v});
  auto services = std::make_shared<PluginServices>(shared_from_this(), std::string(to_string(kind)) + "/" + name);
  const sdk::CreateArgs args{view, services.get()};
  std::unique_ptr<Interface> object;
  std::vector<std::string> unknown_keys;
  const sdk::Status st = factory(args, object, unknown_keys);

  const std::string who = std::string(to_string(kind)) + " plugin '" + name + "' (" + info.path.string() + ")";
  if (!st.ok()) {
    const std::string msg = who + ": " + sdk::to_string(st.code) + ": " + st.detail;
    if (is_usage_status(st.code)) throw UsageError(msg);
    throw RuntimeError(msg);
  }
  if (!object) throw RuntimeError(who + ": factory returned success but no object");
  if (!unknown_keys.empty()) {
    if (unknown == nullptr) {
      std::vector<std::string> quoted;
      for (const auto& k : unknown_keys) quoted.push_back("'" + k + "'");
      throw UsageError(who + ": unknown parameter" + (quoted.size() > 1 ? "s " : " ") + join(quoted, ", "));
    }
    *unknown = std::move(unknown_keys);
  }
  // The holder keeps the library and the object's HostServices (and through them the
  // registry) referenced for as long as the object lives; the object is declared last, so
  // it is destroyed first.
  struct Holder {
    std::shared_ptr<PluginServices> services;
    std::shared_ptr<LoadedLibrary> library;
    std::unique_ptr<Interface> object;
  };
  auto holder = std::make_shared<Holder>(Holder{std::move(services), std::move(library), std::move(object)});
  return std::shared_ptr<Interface>(holder, holder->object.get());
}

template std::shared_ptr<sdk::StorageBackend> Registry::create(PluginKind, const std::string&, const PluginParams&,
                                                               std::vector<std::string>*);
template std::shared_ptr<sdk::CachePolicy> Registry::create(PluginKind, const std::string&, const PluginParams&,
                                                            std::vector<std::string>*);
template std::shared_ptr<sdk::KernelSet> Registry::create(PluginKind, const std::string&, const PluginParams&,
                                                          std::vector<std::string>*);
template std::shared_ptr<sdk::Tokenizer> Registry::create(PluginKind, const std::string&, const PluginParams&,
                                                          std::vector<std::string>*);

void Registry::log(sdk::LogLevel level, std::string_view component, std::string_view message) noexcept {
  try {
    k3::log(level, component, message);
  } catch (...) {
    // Logging must never take a plugin down; a lost line is the lesser harm.
  }
}

void PluginServices::log(sdk::LogLevel level, std::string_view component, std::string_view message) noexcept {
  // The header promises "[<kind>/<name>]" in front; a plugin's own component name, when it
  // says more than that, stays in the message.
  if (component.empty() || component == prefix_) {
    registry_->log(level, prefix_, message);
    return;
  }
  try {
    registry_->log(level, prefix_, std::string(component) + ": " + std::string(message));
  } catch (...) {
    // Logging must never take a plugin down.
  }
}

void Registry::set_file_storage(const std::shared_ptr<sdk::StorageBackend>& storage) {
  const std::lock_guard<std::mutex> lock(file_storage_mutex_);
  file_storage_ = storage;
}

sdk::Status Registry::read_file(std::string_view uri, std::uint64_t max_bytes, std::string& out) noexcept {
  std::shared_ptr<sdk::StorageBackend> storage;
  {
    const std::lock_guard<std::mutex> lock(file_storage_mutex_);
    storage = file_storage_.lock();
  }
  if (!storage)
    return sdk::Status::error(sdk::StatusCode::unsupported,
                              std::string(uri) + ": the host has no storage backend to read plugin files through");
  // One file at a time through the backend: its open() is not required to be thread-safe.
  const std::lock_guard<std::mutex> lock(file_read_mutex_);
  return io::try_read_small_file(*storage, uri, max_bytes, out);
}

sdk::Status Registry::create_storage(std::string_view plugin, std::span<const sdk::Param> params,
                                     std::unique_ptr<sdk::StorageBackend>& out) noexcept {
  if (storage_nesting >= kMaxStorageNesting)
    return sdk::Status::error(sdk::StatusCode::invalid_argument,
                              "storage plugins nest more than " + std::to_string(kMaxStorageNesting) +
                                  " deep at '" + std::string(plugin) + "' (does a decorator wrap itself?)");
  ++storage_nesting;
  struct Unnest {
    ~Unnest() { --storage_nesting; }
  } unnest;
  try {
    PluginParams p;
    for (const auto& kv : params) p.emplace_back(std::string(kv.key), std::string(kv.value));
    std::vector<std::string> unknown;
    auto inner = create<sdk::StorageBackend>(PluginKind::storage, std::string(plugin), p, &unknown);
    if (!unknown.empty()) {
      std::vector<std::string> quoted;
      for (const auto& k : unknown) quoted.push_back("'" + k + "'");
      return sdk::Status::error(sdk::StatusCode::invalid_argument, "storage plugin '" + std::string(plugin) +
                                                                       "' does not know " + join(quoted, ", "));
    }
    out = std::make_unique<NestedStorage>(std::move(inner));
    return sdk::Status::success();
  } catch (const UsageError& e) {
    return sdk::Status::error(sdk::StatusCode::invalid_argument, e.what());
  } catch (const std::exception& e) {
    return sdk::Status::error(sdk::StatusCode::internal, e.what());
  } catch (...) {
    return sdk::Status::error(sdk::StatusCode::internal, "unknown exception while creating storage plugin '" +
                                                             std::string(plugin) + "'");
  }
}

}  // namespace k3::detail
