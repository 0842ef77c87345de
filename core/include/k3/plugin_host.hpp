// The plugin host: finds k3-<kind>-<name>.so libraries on an ordered search path, checks
// their descriptor (ABI first, then toolchain, kind, name) and creates plugin objects.
//
// Only what is used is loaded: the scan reads file names, and a library is opened (and its
// constructors run) the first time it is asked for: find(), create_*(), best_kernels()
// (every kernel set, to compare scores), or plugins()/problems() (everything, for
// `k3host plugins`). A plugin folder or file that its group or others can write, or that
// is owned by neither this user nor root, is refused without being opened.
//
// Search path, in order: the plugin folder next to libk3core (<libdir>/k3host/plugins — the
// build tree or the install prefix, whichever this libk3core is in), then every entry of
// K3_PLUGIN_PATH (colon-separated), then the pipeline's plugin_path entries.
//
// Lifetime: a library is never unloaded while an object it made lives — every object
// returned here holds a reference to its library and to the HostServices it was given
// (libraries are also opened RTLD_NODELETE), so objects may outlive the PluginHost.
#pragma once
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <k3/cache_policy.hpp>
#include <k3/host.hpp>
#include <k3/kernels.hpp>
#include <k3/params.hpp>
#include <k3/storage.hpp>
#include <k3/tokenizer.hpp>
#include <k3/transport.hpp>

namespace k3 {

enum class PluginKind { storage, cache, kernels, tokenizer, transport };
const char* to_string(PluginKind kind) noexcept;

struct PluginInfo {
  PluginKind kind{};
  std::string name;
  std::string version;
  std::filesystem::path path;
  std::uint32_t abi = 0;
  int score = 0;  ///< kernels: 0 = cannot run on this CPU; other kinds: 1
  /// False when the library exports no parameter table (k3_plugin_params): then only its
  /// factory knows which keys it takes.
  bool describes_params = false;
  /// The parameters it takes, in its table's order (checked well-formed when loaded). The
  /// strings point into the library, which stays mapped until the process exits.
  std::vector<k3::sdk::ParamDescriptor> params;
};

/// A library on the search path that cannot be used, with the one-line reason.
struct PluginProblem {
  std::filesystem::path path;
  std::string reason;
};

/// Parameters for a plugin, in pipeline order.
using PluginParams = std::vector<std::pair<std::string, std::string>>;

/// A parameter that the plugin's description refuses (check_params).
struct ParamIssue {
  std::string key;       ///< the parameter, as given ("queue_depth"), or the required one missing
  bool missing = false;  ///< true: a required parameter that was not given
  std::string message;   ///< "0 is out of range 1–4096 (io_uring submission queue depth ...)"
};

class PluginHost;

/// Checks `params` against the parameters `info` describes, creating nothing: keys it does
/// not describe (the message suggests the closest described key and lists them all), values
/// of the wrong type or out of range (quoting the parameter's description, the same words
/// the plugin's ParamReader would use), and required parameters that are missing. With a
/// `host`, a decorator's forwarded keys (K3_PARAM_STORAGE_PARAMS, "inner.*") are checked
/// against the storage plugin they go to, and their issues keep the prefix
/// ("inner.queue_depth"). Empty when every parameter passes, or when the plugin describes
/// none (its factory decides).
std::vector<ParamIssue> check_params(const PluginInfo& info, const PluginParams& params,
                                     const PluginHost* host = nullptr);

/// "has no parameter 'queue_dept' (did you mean 'queue_depth'?); it takes queue_depth,
/// direct": why `info` refuses `keys`, to follow the plugin's name in a message.
std::string unknown_params_message(const PluginInfo& info, const std::vector<std::string>& keys);

/// What `k3host plugins --params` prints for one plugin: a heading line and a table (key,
/// type, default, allowed, meaning), or a line saying it takes none / describes none.
std::string plugin_params_text(const PluginInfo& info);
/// The Markdown that docs/pipelines.md embeds for `plugins` (`k3host plugins --params
/// --markdown`): a table per plugin that takes parameters, in kind order, then one line per
/// kind naming those that take none. Paths and versions are left out, so it depends only on
/// the plugins' tables.
std::string plugin_params_markdown(const std::vector<PluginInfo>& plugins);

class PluginHost {
 public:
  /// Builds the search path (see above) with `extra_dirs` (the pipeline's plugin_path) last,
  /// and scans it. Directories that do not exist are skipped.
  explicit PluginHost(std::vector<std::filesystem::path> extra_dirs = {});
  ~PluginHost();
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;

  [[nodiscard]] const std::vector<std::filesystem::path>& search_path() const noexcept;
  /// Usable plugins, in search-path order. Opens every library on the path.
  [[nodiscard]] const std::vector<PluginInfo>& plugins() const noexcept;
  /// Libraries and folders that were refused (bad ABI, no descriptor, wrong kind, writable
  /// by others, ...). Opens every library on the path.
  [[nodiscard]] const std::vector<PluginProblem>& problems() const noexcept;

  /// The plugin `name` of `kind`. Throws UsageError naming the file when it is missing,
  /// duplicated, of another kind, or was refused (with the reason), or when `kind` is
  /// kernels and its score is 0 on this CPU.
  [[nodiscard]] const PluginInfo& find(PluginKind kind, const std::string& name) const;
  /// The runnable kernel set with the highest score.
  [[nodiscard]] const PluginInfo& best_kernels() const;

  /// Creation. Parameters the plugin does not recognise are returned in `unknown` when it
  /// is given, and are a UsageError otherwise. Failures throw UsageError naming the plugin.
  std::shared_ptr<sdk::StorageBackend> create_storage(const std::string& name, const PluginParams& params,
                                                      std::vector<std::string>* unknown = nullptr);
  std::shared_ptr<sdk::CachePolicy> create_cache(const std::string& name, const PluginParams& params,
                                                 std::vector<std::string>* unknown = nullptr);
  std::shared_ptr<sdk::KernelSet> create_kernels(const std::string& name, const PluginParams& params,
                                                 std::vector<std::string>* unknown = nullptr);
  std::shared_ptr<sdk::Tokenizer> create_tokenizer(const std::string& name, const PluginParams& params,
                                                   std::vector<std::string>* unknown = nullptr);
  /// A transport joins the job of ranks it was started in (docs/cluster.md); one per process.
  std::shared_ptr<sdk::Transport> create_transport(const std::string& name, const PluginParams& params,
                                                   std::vector<std::string>* unknown = nullptr);

  /// Objects of `kind` created through the create_* calls above so far (what a decorator
  /// creates through HostServices is not counted): a run creates each of its plugin
  /// objects once, and a test can see it.
  [[nodiscard]] std::size_t created(PluginKind kind) const noexcept;

  /// The services handed to plugins (logging, nested storage creation, file reads).
  [[nodiscard]] sdk::HostServices& services() noexcept;

  /// The storage backend HostServices::read_file reads through: the pipeline's, so that a
  /// plugin reaches files next to the checkpoint (the tokenizer's) the way the checkpoint
  /// is reached. Held weakly: the caller keeps it alive. Until set, read_file is
  /// unsupported.
  void set_file_storage(const std::shared_ptr<sdk::StorageBackend>& storage);

  /// What HostServices::stop_requested() reports to this host's plugins: `flag`'s value
  /// (the CLI's StopSignal), or false when null (the default). The flag must outlive its
  /// use; set null before it goes. Set by run_job() for the length of a batch run, so a
  /// stop request cuts a storage wait short there (docs/architecture.md, "Stopping a run").
  void set_stop_flag(const std::atomic<bool>* flag) noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// For its lifetime, `host`'s plugins see `flag` as HostServices::stop_requested() (null
/// before it goes): a batch run, a chat answer or a server's life, so that a stop request
/// cuts a storage wait short.
class StopFlagScope {
 public:
  StopFlagScope(PluginHost& host, const std::atomic<bool>* flag) noexcept : host_(host) { host_.set_stop_flag(flag); }
  ~StopFlagScope() { host_.set_stop_flag(nullptr); }
  StopFlagScope(const StopFlagScope&) = delete;
  StopFlagScope& operator=(const StopFlagScope&) = delete;

 private:
  PluginHost& host_;
};

}  // namespace k3
