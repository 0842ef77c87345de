// From a pipeline to plugin objects, the one way (k3/pipeline_plugins.hpp): find each
// plugin, check its parameters against its table at their place in the pipeline file, run
// its factory and refuse the keys the factory did not read.
#include <k3/pipeline_plugins.hpp>

#include <string>
#include <string_view>
#include <vector>

#include <k3/error.hpp>

#include "io/small_file.hpp"
#include "io/uri.hpp"

namespace k3 {
namespace {

/// Refuses the first parameter that the plugin's description refuses (an undescribed key, a
/// value of the wrong type or range), at the parameter's own place in the pipeline, before
/// the factory runs; a missing required one (unless `allow_missing`) at the key that chose
/// the plugin.
void check_described(const Pipeline& p, const PluginHost& host, std::string_view plugin_key,
                     std::string_view params_key, const PluginInfo& info, const PluginParams& params,
                     bool allow_missing = false) {
  for (const ParamIssue& issue : check_params(info, params, &host)) {
    if (issue.missing && allow_missing) continue;
    const std::string key = std::string(params_key) + "." + issue.key;
    if (issue.missing)
      p.refuse(plugin_key,
               std::string(to_string(info.kind)) + " plugin '" + info.name + "' needs " + key + ": " + issue.message);
    if (p.has(key)) p.refuse(key, issue.message);
    p.refuse(params_key, issue.key + ": " + issue.message);  // a value the host filled in
  }
}

/// The keys the factory itself reported as not read, refused at `key`: a plugin that does
/// not describe its parameters, or one whose factory does not read a key it describes.
void refuse_unknown(const Pipeline& p, std::string_view key, const PluginInfo& info,
                    const std::vector<std::string>& unknown) {
  if (unknown.empty()) return;
  std::vector<std::string> described;
  for (const auto& u : unknown)
    if (sdk::find_param(info.params, u) != nullptr) described.push_back(u);
  if (!described.empty())
    p.refuse(key, std::string(to_string(info.kind)) + " plugin '" + info.name + "' describes '" + described.front() +
                      "' but its factory did not read it (a bug in " + info.path.string() + ")");
  p.refuse(key,
           std::string(to_string(info.kind)) + " plugin '" + info.name + "' " + unknown_params_message(info, unknown));
}

/// A plugin section of the pipeline: the key that names the plugin and the key of its
/// parameters.
struct Section {
  PluginKind kind;
  const char* plugin_key;
  const char* params_key;
};
constexpr Section kStorage{PluginKind::storage, "storage.plugin", "storage.params"};
constexpr Section kCache{PluginKind::cache, "cache.policy", "cache.params"};
constexpr Section kKernels{PluginKind::kernels, "kernels.set", "kernels.params"};
constexpr Section kTokenizer{PluginKind::tokenizer, "tokenizer.plugin", "tokenizer.params"};
constexpr Section kTransport{PluginKind::transport, "cluster.transport", "cluster.params"};

/// The plugin a section names ("auto" kernels resolved), found on the host's search path.
const PluginInfo& find_plugin(const Pipeline& p, PluginHost& host, const Section& s, std::string& name) {
  name = p.get_string(s.plugin_key);
  if (s.kind == PluginKind::kernels && name == "auto") name = host.best_kernels().name;
  const PluginInfo* info = nullptr;
  p.at_key(s.plugin_key, [&] { info = &host.find(s.kind, name); });
  return *info;
}

/// Creates the object a section names with `params`, checked first against its table.
template <class Create>
auto create_checked(const Pipeline& p, PluginHost& host, const Section& s, const PluginInfo& info,
                    const PluginParams& params, Create&& create) {
  check_described(p, host, s.plugin_key, s.params_key, info, params);
  std::vector<std::string> unknown;
  decltype(create(params, &unknown)) out;
  p.at_key(s.params_key, [&] { out = create(params, &unknown); });
  refuse_unknown(p, s.params_key, info, unknown);
  return out;
}

}  // namespace

ModelPlugins create_pipeline_plugins(const Pipeline& p, PluginHost& host, PluginParts parts) {
  ModelPlugins out;
  if (has(parts, PluginParts::storage)) {
    const PluginInfo& info = find_plugin(p, host, kStorage, out.storage_name);
    out.storage = create_checked(p, host, kStorage, info, p.get_params(kStorage.params_key),
                                 [&](const PluginParams& params, std::vector<std::string>* unknown) {
      return host.create_storage(out.storage_name, params, unknown);
    });
  }
  if (has(parts, PluginParts::cache)) {
    const PluginInfo& info = find_plugin(p, host, kCache, out.cache_name);
    out.cache = create_checked(p, host, kCache, info, p.get_params(kCache.params_key),
                               [&](const PluginParams& params, std::vector<std::string>* unknown) {
      return host.create_cache(out.cache_name, params, unknown);
    });
  }
  if (has(parts, PluginParts::kernels)) {
    const PluginInfo& info = find_plugin(p, host, kKernels, out.kernel_name);
    out.kernels = create_checked(p, host, kKernels, info, p.get_params(kKernels.params_key),
                                 [&](const PluginParams& params, std::vector<std::string>* unknown) {
      return host.create_kernels(out.kernel_name, params, unknown);
    });
  }
  if (has(parts, PluginParts::tokenizer)) {
    // Created after the model loads, but what the pipeline gives it is checked now, with the
    // others (its `model` file is filled in by create_pipeline_tokenizer).
    std::string name;
    const PluginInfo& info = find_plugin(p, host, kTokenizer, name);
    check_described(p, host, kTokenizer.plugin_key, kTokenizer.params_key, info, p.get_params(kTokenizer.params_key),
                    true);
  }
  return out;
}

std::shared_ptr<sdk::StorageBackend> create_pipeline_storage(const Pipeline& p, PluginHost& host) {
  return create_pipeline_plugins(p, host, PluginParts::storage).storage;
}

std::shared_ptr<sdk::Transport> create_pipeline_transport(const Pipeline& p, PluginHost& host) {
  std::string name;
  const PluginInfo& info = find_plugin(p, host, kTransport, name);
  return create_checked(p, host, kTransport, info, p.get_params(kTransport.params_key),
                        [&](const PluginParams& params, std::vector<std::string>* unknown) {
    return host.create_transport(name, params, unknown);
  });
}

std::shared_ptr<sdk::Tokenizer> create_pipeline_tokenizer(const Pipeline& p, PluginHost& host,
                                                          const std::string& model_uri,
                                                          const std::shared_ptr<sdk::StorageBackend>& storage) {
  PluginParams params = p.get_params(kTokenizer.params_key);
  auto given = [&](const char* k) {
    for (const auto& kv : params)
      if (kv.first == k) return true;
    return false;
  };
  if (!given("model")) params.emplace_back("model", io::join_uri(model_uri, "tiktoken.model"));
  const std::string config = io::join_uri(model_uri, "tokenizer_config.json");
  if (!given("config") && io::open_file(*storage, config, "a checkpoint file", true) != nullptr)
    params.emplace_back("config", config);
  host.set_file_storage(storage);
  std::string name;
  const PluginInfo& info = find_plugin(p, host, kTokenizer, name);
  return create_checked(p, host, kTokenizer, info, params,
                        [&](const PluginParams& ps, std::vector<std::string>* unknown) {
    return host.create_tokenizer(name, ps, unknown);
  });
}

}  // namespace k3
