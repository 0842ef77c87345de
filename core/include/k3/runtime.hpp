// A pipeline's model and tokenizer, loaded once: what the batch job, `chat` and `serve`
// share. Loading checks the plugin sections first (a typo is reported at its line before
// any work), makes sure the checkpoint exists (only the demo location of
// configs/default.yaml is generated on first use), loads the model through the storage
// plugin and creates the tokenizer, which reads its files through the same plugin.
#pragma once
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <k3/generate.hpp>
#include <k3/model.hpp>
#include <k3/pipeline.hpp>
#include <k3/pipeline_plugins.hpp>
#include <k3/plugin_host.hpp>

namespace k3 {

class Cluster;
class DraftModel;

struct LoadHooks {
  /// A line of progress (model generation, loading); may be empty.
  std::function<void(const std::string&)> on_status;
  /// Progress of long work (bytes done of total); may be empty.
  std::function<void(const std::string& what, std::uint64_t done, std::uint64_t total)> on_progress;
  /// The memory plan (printed table) once the model is loaded, before any compute.
  std::function<void(const std::string& plan_table)> on_plan;
  /// When set and it becomes true (the CLI's StopSignal), work stops at its next boundary:
  /// writing the synthetic demo checkpoint ends with k3::Error(ExitCode::interrupted),
  /// keeping nothing of it; the batch job's generation stops at the next token or prefill
  /// chunk and still writes its files (JobHooks). Not owned.
  const std::atomic<bool>* stop = nullptr;
  /// Rank 0 of a model split over ranks (k3/cluster.hpp): the model holds this rank's layers
  /// and its passes go through every rank. Null for one process. Not owned.
  Cluster* cluster = nullptr;
};

/// How many sequences a run decodes at once: the memory plan holds the KDA state, MLA KV and
/// journals of each (k3/plan.hpp).
enum class RunSequences {
  one,      ///< one prompt or conversation at a time (the batch job, chat, bench)
  batched,  ///< serve.parallel of them together (`serve`, `--prompts`; k3/scheduler.hpp)
};

class Runtime {
 public:
  /// UsageError (exit 2) for anything wrong in the pipeline's plugin or model sections.
  Runtime(const Pipeline& pipeline, PluginHost& host, const LoadHooks& hooks = {},
          RunSequences sequences = RunSequences::one);
  /// The same with the pipeline's plugin objects already created (create_pipeline_plugins
  /// with PluginParts::model), for a caller that reports their names even when loading fails.
  Runtime(const Pipeline& pipeline, PluginHost& host, ModelPlugins plugins, const LoadHooks& hooks = {},
          RunSequences sequences = RunSequences::one);
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  [[nodiscard]] Model& model() noexcept { return *model_; }
  [[nodiscard]] const Model& model() const noexcept { return *model_; }
  [[nodiscard]] sdk::Tokenizer& tokenizer() noexcept { return *tokenizer_; }
  [[nodiscard]] const ModelSettings& settings() const noexcept { return settings_; }
  /// model.path: a folder or a URL, as the storage plugin reads it.
  [[nodiscard]] const std::string& model_uri() const noexcept { return uri_; }
  /// Seconds from the start of loading (after any generation) to a usable model.
  [[nodiscard]] double load_seconds() const noexcept { return load_seconds_; }
  /// job.speculative.draft_model, loaded (null when not set or drafting is off).
  [[nodiscard]] std::shared_ptr<DraftModel> draft_model() const noexcept { return draft_model_; }
  /// Whether a chat answer opens K3's think channel when nothing asks otherwise: model.thinking,
  /// or with `auto` the checkpoint's `k3host_thinking` (ModelConfig::thinking; absent: true).
  [[nodiscard]] bool thinking() const noexcept { return thinking_; }

  /// Plain text to ids (no special tokens). UsageError when the tokenizer refuses it.
  [[nodiscard]] std::vector<std::uint32_t> encode(const std::string& text) const;
  /// Ids to text. RuntimeError when the tokenizer fails.
  [[nodiscard]] std::string decode(const std::vector<std::uint32_t>& ids) const;

 private:
  std::string uri_;
  ModelSettings settings_;
  std::unique_ptr<Model> model_;
  std::shared_ptr<sdk::Tokenizer> tokenizer_;
  std::shared_ptr<DraftModel> draft_model_;
  double load_seconds_ = 0;
  bool thinking_ = true;
};

/// True when the value of `key` was given for this run: by a --set override (the CLI's
/// --prompt, --ids, ... are ones) or by a pipeline file other than configs/default.yaml.
/// False for the schema default and for what configs/default.yaml sets (its demo prompt is
/// the framework's example, not the user's input).
bool set_by_user(const Pipeline& pipeline, std::string_view key);

/// True when model.path is the demo location (configs/default.yaml's model.demo_path) and
/// model.generate_if_missing is on: the one case where a missing checkpoint is written on
/// first use instead of refused.
bool generates_missing_checkpoint(const Pipeline& pipeline);

/// The generation settings of the pipeline's job section (mode, prefill chunk, sampling,
/// token limit, EOS, speculative decoding; no prompt) for `config`'s model.
GenerateSettings generate_settings_of(const Pipeline& pipeline, const ModelConfig& config);
/// The same, with the corpus of job.speculative.datastore (when drafting is on) read and
/// encoded with the runtime's tokenizer. UsageError naming the key for a missing or
/// unreadable file.
GenerateSettings generate_settings_of(const Pipeline& pipeline, const Runtime& runtime);

/// The whole text of a file a pipeline key names; `what` says where and which key
/// ("--file x: job.prompt_file"). UsageError for a missing file, a folder, anything else
/// that is not a regular file (a device, a FIFO) or a file larger than `max_bytes`
/// (k3/user_files.hpp: kMaxPromptFileBytes, kMaxTextFileBytes), checked before reading.
std::string read_text_file(const std::filesystem::path& file, const std::string& what, std::uint64_t max_bytes);

/// The local folders of the checkpoints a pipeline runs (model.path, model.packed_trunk and
/// job.speculative.draft_model, when set and not URLs): k3host writes nothing inside them.
std::vector<std::filesystem::path> checkpoint_folders(const Pipeline& pipeline);

/// Turns generated ids into text as they come: each push() returns the text that became
/// complete with that token (a BPE piece may end inside a UTF-8 sequence; its bytes wait
/// for the token that completes them).
class TextStream {
 public:
  explicit TextStream(const Runtime& runtime) : runtime_(runtime) {}
  std::string push(std::uint32_t id);
  /// Whatever push() held back (an unfinished UTF-8 sequence at the very end).
  std::string flush();
  [[nodiscard]] const std::vector<std::uint32_t>& ids() const noexcept { return ids_; }
  void clear() noexcept;

 private:
  const Runtime& runtime_;
  std::vector<std::uint32_t> ids_;
  std::size_t printed_ = 0;  ///< bytes of decode(ids_) already returned
};

}  // namespace k3
