// The one way from a pipeline to plugin objects (docs/architecture.md, "Each plugin object is
// created once per run"): every command (the job, chat, serve, bench, doctor, perplexity,
// plan, storage, tokenize) and the draft model get theirs here, and nowhere else reads the
// pipeline's storage.*, cache.*, kernels.*, tokenizer.* and cluster.* plugin keys. Each
// plugin is found, its parameters are checked against its table before its factory runs,
// and a refusal is a UsageError at the key's file:line:col.
#pragma once
#include <memory>
#include <string>

#include <k3/model.hpp>
#include <k3/pipeline.hpp>
#include <k3/plugin_host.hpp>

namespace k3 {

namespace sdk {
class Transport;
}

/// Which of a pipeline's plugin objects to create (a bit set).
enum class PluginParts : unsigned {
  storage = 1u << 0,    ///< storage.plugin with storage.params
  cache = 1u << 1,      ///< cache.policy with cache.params
  kernels = 1u << 2,    ///< kernels.set ("auto": the best set this CPU runs) with kernels.params
  tokenizer = 1u << 3,  ///< tokenizer.plugin and tokenizer.params checked only: the tokenizer
                        ///< reads its files through the model's storage, so it is created
                        ///< after the model loads (create_pipeline_tokenizer)
  /// What a run needs before its model loads.
  model = storage | cache | kernels | tokenizer,
};
[[nodiscard]] constexpr PluginParts operator|(PluginParts a, PluginParts b) noexcept {
  return static_cast<PluginParts>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
[[nodiscard]] constexpr bool has(PluginParts set, PluginParts part) noexcept {
  return (static_cast<unsigned>(set) & static_cast<unsigned>(part)) != 0;
}

/// Creates the plugin objects `parts` names, once each, with their names (the parts not
/// asked for are null and empty).
ModelPlugins create_pipeline_plugins(const Pipeline& pipeline, PluginHost& host,
                                     PluginParts parts = PluginParts::model);

/// The pipeline's storage backend alone, for tools that read the checkpoint without a model
/// (`storage warm`, `plan --from-checkpoint`, `tokenize`, `doctor`).
std::shared_ptr<sdk::StorageBackend> create_pipeline_storage(const Pipeline& pipeline, PluginHost& host);

/// The transport plugin cluster.transport names (k3/cluster.hpp), with cluster.params
/// checked like the others; creating it joins the job of ranks.
std::shared_ptr<sdk::Transport> create_pipeline_transport(const Pipeline& pipeline, PluginHost& host);

/// The pipeline's tokenizer, its `model` and `config` files defaulting to the checkpoint's
/// own at `model_uri` (tiktoken.model; tokenizer_config.json when it is there), which the
/// plugin reads through `storage` (PluginHost::set_file_storage).
std::shared_ptr<sdk::Tokenizer> create_pipeline_tokenizer(const Pipeline& pipeline, PluginHost& host,
                                                          const std::string& model_uri,
                                                          const std::shared_ptr<sdk::StorageBackend>& storage);

}  // namespace k3
