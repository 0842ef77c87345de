#include "plugin_host/registry.hpp"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <span>

#include <k3/abi.hpp>
#include <k3/closest_name.hpp>
#include <k3/error.hpp>
#include <k3/log.hpp>
#include <k3/plugin.hpp>
#include <k3/user_files.hpp>

#include "io/small_file.hpp"

namespace k3::detail {

namespace fs = std::filesystem;

namespace {

bool parse_kind(std::string_view s, PluginKind& out) {
  for (PluginKind k :
       {PluginKind::storage, PluginKind::cache, PluginKind::kernels, PluginKind::tokenizer, PluginKind::transport}) {
    if (s == to_string(k)) {
      out = k;
      return true;
    }
  }
  return false;
}

/// Boost.DLL wraps dlerror() in its own words and a system_error's: "load() failed
/// (dlerror system message: <what the loader said>): <strerror of a stale errno>". Keep only
/// what the dynamic loader said: up to the last ')', since the strerror text after it holds
/// none.
std::string load_failure(const std::exception& e) {
  const std::string what = e.what();
  const std::string marker = "dlerror system message: ";
  const auto at = what.find(marker);
  if (at == std::string::npos) return what;
  std::string text = what.substr(at + marker.size());
  if (const auto close = text.rfind(')'); close != std::string::npos) text.erase(close);
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

/// More parameters than any plugin needs: a larger count is a corrupt table.
constexpr std::uint32_t kMaxParams = 4096;
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

namespace {

/// Why `path` (a plugin folder or file) must not be trusted, or "" when it may be: anyone
/// who can write it could make every k3host run their code.
std::string unsafe_owner_or_mode(const fs::path& path, const char* what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::string(what) + " " + path.string() + " cannot be inspected";
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return std::string(what) + " " + path.string() + " is writable by " +
           ((st.st_mode & S_IWOTH) != 0 ? "everyone" : "its group") + " (chmod go-w it)";
  if (st.st_uid != 0 && st.st_uid != ::geteuid())
    return std::string(what) + " " + path.string() + " is owned by uid " + std::to_string(st.st_uid) +
           ", neither this user nor root";
  return {};
}

/// "k3-<kind>-<name>.so" -> kind and name; false for any other file name.
bool parse_file_name(const std::string& file, PluginKind& kind, std::string& name) {
  if (file.rfind("k3-", 0) != 0 || file.size() < 7 || file.compare(file.size() - 3, 3, ".so") != 0) return false;
  const std::string stem = file.substr(3, file.size() - 6);
  const auto dash = stem.find('-');
  if (dash == std::string::npos || !parse_kind(stem.substr(0, dash), kind)) return false;
  name = stem.substr(dash + 1);
  return !name.empty();
}

}  // namespace

void Registry::scan_dir(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  std::vector<fs::path> files;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string fname = it->path().filename().string();
    if (fname.rfind("k3-", 0) == 0 && it->path().extension() == ".so") files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  const std::string folder_refusal = unsafe_owner_or_mode(dir, "plugin folder");
  if (!folder_refusal.empty() && !files.empty()) scan_problems_.push_back({dir, folder_refusal});
  for (const auto& path : files) {
    const fs::path canonical = fs::weakly_canonical(path, ec);
    const fs::path& key = ec ? path : canonical;
    if (std::find(seen_.begin(), seen_.end(), key) != seen_.end()) continue;  // reached twice via the path
    seen_.push_back(key);
    // dlopen() of a FIFO waits for a writer forever, and of a device reads it: only a
    // regular file (or a link to one) is a library.
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      scan_problems_.push_back({path, "is " + std::string(file_type_name(st.st_mode)) +
                                          ", not a regular file: not a k3host plugin (never opened)"});
      continue;
    }
    Candidate c;
    if (!parse_file_name(path.filename().string(), c.kind, c.name)) {
      scan_problems_.push_back({path,
                                "is not named k3-<kind>-<name>.so with a kind of storage, cache, kernels, "
                                "tokenizer or transport: not a k3host plugin"});
      continue;
    }
    c.path = path;
    c.refusal = folder_refusal.empty() ? unsafe_owner_or_mode(path, "plugin file") : folder_refusal;
    auto& same = declared_[{c.kind, c.name}];
    if (!same.empty() && c.refusal.empty())
      // find() refuses the name while both are on the path; refusing the second file here
      // makes `k3host plugins` show the clash too.
      c.refusal = std::string(to_string(c.kind)) + " plugin '" + c.name + "' is already defined by " +
                  candidates_[same.front()].path.string() + "; remove all but one from the plugin search path";
    same.push_back(candidates_.size());
    candidates_.push_back(std::move(c));
  }
}

void Registry::load(Candidate& c) noexcept {
  if (c.loaded) return;
  c.loaded = true;
  if (!c.refusal.empty()) return;
  auto refuse = [&](std::string reason) { c.refusal = std::move(reason); };
  try {
    auto loaded = std::make_shared<LoadedLibrary>();
    try {
      // RTLD_NODELETE: a plugin's code stays mapped until the process exits, whatever happens
      // to handles, so no object (nor a thread it left running) can outlive its code.
      const auto mode = static_cast<boost::dll::load_mode::type>(RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
      loaded->lib.load(c.path, mode);
    } catch (const std::exception& e) {
      return refuse("cannot be loaded: " + load_failure(e));
    }
    if (!loaded->lib.has("k3_plugin_descriptor"))
      return refuse("has no k3_plugin_descriptor symbol: not a k3host plugin (build it with K3_PLUGIN)");
    // The ABI number is read first and alone: it is the only field guaranteed to mean the
    // same thing in every version of the descriptor.
    const auto& d = loaded->lib.get_alias<const K3PluginDescriptor>("k3_plugin_descriptor");
    if (d.abi != K3_PLUGIN_ABI)
      return refuse("incompatible plugin ABI (plugin: " + std::to_string(d.abi) +
                    ", host: " + std::to_string(K3_PLUGIN_ABI) + "); rebuild it against this SDK");
    const char* toolchain = d.toolchain != nullptr ? d.toolchain : "";
    if (std::strcmp(toolchain, K3_TOOLCHAIN) != 0)
      return refuse(std::string("incompatible toolchain (plugin: ") + toolchain + ", host: " + K3_TOOLCHAIN +
                    "); rebuild it with the host's compiler and C++ standard library");
    PluginInfo info;
    if (d.kind == nullptr || !parse_kind(d.kind, info.kind))
      return refuse(std::string("declares unknown kind '") + (d.kind != nullptr ? d.kind : "") +
                    "' (expected storage, cache, kernels, tokenizer or transport)");
    info.name = d.name != nullptr ? d.name : "";
    info.version = d.version != nullptr ? d.version : "";
    info.path = c.path;
    info.abi = d.abi;
    if (info.kind != c.kind || info.name != c.name)
      return refuse("declares kind '" + std::string(to_string(info.kind)) + "' and name '" + info.name +
                    "', so its file must be named k3-" + to_string(info.kind) + "-" + info.name + ".so");
    if (!loaded->lib.has("k3_plugin_create"))
      return refuse("has a descriptor but no k3_plugin_create factory (build it with K3_PLUGIN)");
    if (loaded->lib.has("k3_plugin_params")) {
      // Plain data like the descriptor: read now, so `k3host plugins --params` and the
      // pipeline's parameter check need no plugin object.
      const auto& table = loaded->lib.get_alias<const K3PluginParams>("k3_plugin_params");
      if (table.count > kMaxParams || (table.count > 0 && table.items == nullptr))
        return refuse("has a parameter table of " + std::to_string(table.count) +
                      " entries that cannot be read (build it with K3_PLUGIN_PARAMS)");
      const std::span<const k3::sdk::ParamDescriptor> items(table.items, table.count);
      if (const std::string problem = sdk::table_problem(items); !problem.empty())
        return refuse("has a malformed parameter table: " + problem);
      info.describes_params = true;
      info.params.assign(items.begin(), items.end());
    }
    info.score = 1;
    if (d.score != nullptr) {
      try {
        info.score = d.score();
      } catch (...) {
        return refuse("its score() function threw an exception");
      }
    }
    loaded->info = info;
    c.info = std::move(info);
    c.library = std::move(loaded);
  } catch (const std::exception& e) {
    refuse(std::string("cannot be checked: ") + e.what());
  }
}

void Registry::load_all() noexcept {
  for (Candidate& c : candidates_) load(c);
}

const std::vector<PluginInfo>& Registry::plugins() noexcept {
  load_all();
  plugins_.clear();
  for (const Candidate& c : candidates_)
    if (c.refusal.empty()) plugins_.push_back(c.info);
  return plugins_;
}

const std::vector<PluginProblem>& Registry::problems() noexcept {
  load_all();
  problems_ = scan_problems_;
  for (const Candidate& c : candidates_)
    if (!c.refusal.empty()) problems_.push_back({c.path, c.refusal});
  return problems_;
}

const PluginInfo& Registry::find(PluginKind kind, const std::string& name) {
  const std::string what = std::string(to_string(kind)) + " plugin '" + name + "'";
  const auto it = declared_.find({kind, name});
  if (it != declared_.end() && it->second.size() > 1) {
    std::vector<std::string> files;
    for (const std::size_t i : it->second) files.push_back(candidates_[i].path.string());
    throw UsageError(what + " is defined by more than one library: " + join(files, ", ") +
                     "; remove all but one from the plugin search path");
  }
  if (it == declared_.end()) {
    // Names are exact identifiers; the suggestion ignores case (`URING` -> uring).
    std::vector<std::string> same_kind;
    for (const auto& [key, files] : declared_)
      if (key.first == kind) same_kind.push_back(key.second);
    const std::string near = closest_name(name, same_kind);
    std::string msg = what + " not found" + (near.empty() ? std::string() : " (did you mean '" + near + "'?)");
    for (const Candidate& c : candidates_)
      if (c.name == name) msg += "; '" + name + "' is a " + to_string(c.kind) + " plugin (" + c.path.string() + ")";
    for (const PluginProblem& pr : scan_problems_)
      if (pr.path.filename().string().find(name) != std::string::npos)
        msg += "; " + pr.path.string() + " was refused: " + pr.reason;
    std::vector<std::string> dirs;
    for (const auto& d : search_path_) dirs.push_back(d.string());
    throw UsageError(msg + " (searched " + join(dirs, ":") + ")");
  }
  Candidate& c = candidates_[it->second.front()];
  load(c);
  if (!c.refusal.empty()) throw UsageError(what + ": " + c.path.string() + " was refused: " + c.refusal);
  if (kind == PluginKind::kernels && c.info.score <= 0)
    throw UsageError(what + " (" + c.path.string() + ") cannot run on this CPU (score " + std::to_string(c.info.score) +
                     ")");
  return c.info;
}

const PluginInfo& Registry::best_kernels() {
  const PluginInfo* best = nullptr;
  for (Candidate& c : candidates_) {
    if (c.kind != PluginKind::kernels) continue;
    load(c);
    if (c.refusal.empty() && c.info.score > 0 && (best == nullptr || c.info.score > best->score)) best = &c.info;
  }
  if (best == nullptr) throw UsageError("no kernel set on the plugin search path can run on this CPU");
  return *best;
}

Registry::Candidate& Registry::candidate_of(const PluginInfo& info) {
  // `info` is a Candidate's (find() returns references into candidates_).
  for (Candidate& c : candidates_)
    if (&c.info == &info) return c;
  throw RuntimeError(info.path.string() + ": plugin registry is inconsistent");
}

template <class Interface>
std::shared_ptr<Interface> Registry::create(PluginKind kind, const std::string& name, const PluginParams& params,
                                            std::vector<std::string>* unknown) {
  const PluginInfo& info = find(kind, name);
  std::shared_ptr<LoadedLibrary> library = candidate_of(info).library;
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
      throw UsageError(who + " " + unknown_params_message(info, unknown_keys));
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
template std::shared_ptr<sdk::Transport> Registry::create(PluginKind, const std::string&, const PluginParams&,
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
                              "storage plugins nest more than " + std::to_string(kMaxStorageNesting) + " deep at '" +
                                  std::string(plugin) + "' (does a decorator wrap itself?)");
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
      const PluginInfo& info = find(PluginKind::storage, std::string(plugin));
      return sdk::Status::error(sdk::StatusCode::invalid_argument, "storage plugin '" + std::string(plugin) + "' " +
                                                                       unknown_params_message(info, unknown));
    }
    out = std::make_unique<NestedStorage>(std::move(inner));
    return sdk::Status::success();
  } catch (const UsageError& e) {
    return sdk::Status::error(sdk::StatusCode::invalid_argument, e.what());
  } catch (const std::exception& e) {
    return sdk::Status::error(sdk::StatusCode::internal, e.what());
  } catch (...) {
    return sdk::Status::error(sdk::StatusCode::internal,
                              "unknown exception while creating storage plugin '" + std::string(plugin) + "'");
  }
}

}  // namespace k3::detail
