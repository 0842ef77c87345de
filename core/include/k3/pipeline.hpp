// Pipelines: the YAML files that describe a run (docs/pipelines.md).
//
// load_pipeline() reads a file, follows `extends:` (a path relative to the file that says
// it; chains allowed; a cycle is an error naming the files), merges (later keys win; maps
// merge key by key, scalars and lists replace), expands ${VAR} and ${VAR:-default} from the
// environment in scalar values, applies `--set a.b=c` overrides (the value parsed as YAML),
// and checks the result against the schema (core/src/config/schema.cpp): an unknown key, a
// wrong type or an out-of-range value is a UsageError "file:line:col: key: message"
// (overrides report how the command line said it, "--set a.b=c" or "--max-tokens 8",
// instead of a file position).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <k3/plugin_host.hpp>

namespace k3 {

class Pipeline {
 public:
  Pipeline();
  ~Pipeline();
  Pipeline(Pipeline&&) noexcept;
  Pipeline& operator=(Pipeline&&) noexcept;

  /// Typed access by dotted key ("memory.trunk_gb"). Every schema key has a value after
  /// loading (its default when no file set it), in canonical form. A key outside the
  /// schema, or a getter that does not fit the key's type, throws std::logic_error: that is
  /// a bug in the caller, not a configuration error. A loaded Pipeline is immutable, so
  /// concurrent reads are safe.
  ///
  /// True for every schema key, and for a plugin parameter that was set
  /// ("storage.params.block_size"); false for anything else (never throws).
  [[nodiscard]] bool has(std::string_view key) const;
  /// Any scalar key as text (numbers canonical: "3", "0.31"; booleans "true"/"false";
  /// budgets a number or "fit"; paths resolved).
  [[nodiscard]] std::string get_string(std::string_view key) const;
  [[nodiscard]] std::int64_t get_int(std::string_view key) const;
  /// Numbers, integers, and budgets that are not "fit".
  [[nodiscard]] double get_double(std::string_view key) const;
  /// A memory budget in GB; nullopt when it is "fit" (sized from available memory).
  [[nodiscard]] std::optional<double> get_budget(std::string_view key) const;
  [[nodiscard]] bool get_bool(std::string_view key) const;
  /// A list (plugin_path, job.ids) as strings; paths already resolved.
  [[nodiscard]] std::vector<std::string> get_strings(std::string_view key) const;
  /// An integer list (job.ids).
  [[nodiscard]] std::vector<std::int64_t> get_ints(std::string_view key) const;
  /// A path value, absolute: a relative path is resolved against the directory of the file
  /// that set it (or the working directory for --set and defaults). Empty when unset.
  [[nodiscard]] std::filesystem::path get_path(std::string_view key) const;
  /// A section's free-form `params:` map (e.g. "storage.params"), flattened to strings:
  /// nested maps join keys with '.', lists join items with ','; `!path` values resolved.
  [[nodiscard]] PluginParams get_params(std::string_view key) const;
  /// Where a key's value came from: "presets/laptop.yaml:12:5", "--set a.b=c", or "default".
  /// Also works for a parameter that was set ("storage.params.block_size"), so a plugin's
  /// refusal of a parameter can point at the file.
  [[nodiscard]] std::string where(std::string_view key) const;
  /// The pipeline file whose value `key` holds (absolute); empty when the value came from a
  /// --set override or is the schema default. Throws std::logic_error like the getters.
  [[nodiscard]] std::filesystem::path source_file(std::string_view key) const;
  /// Throws UsageError "<where(key)>: <key>: <message>", for a value the pipeline accepted
  /// but a later stage refuses (a plugin parameter it does not know, a checkpoint folder
  /// without config.json), so the message still points at the file that set it.
  [[noreturn]] void refuse(std::string_view key, const std::string& message) const;
  /// Runs `work`; a UsageError it throws is refused at `key` (refuse(key, its message)), so
  /// what a later stage finds wrong with a value points at the file that set it.
  void at_key(std::string_view key, const std::function<void()>& work) const;
  /// The pipeline's plugin_path entries, resolved.
  [[nodiscard]] std::vector<std::filesystem::path> plugin_path() const;
  /// The merged pipeline as YAML, every key included.
  [[nodiscard]] std::string dump() const;
  /// The pipeline as rank `rank` of a model split over ranks sees it (docs/cluster.md):
  /// every cluster.ranks.<rank>.KEY set over it (checked when it was loaded).
  [[nodiscard]] Pipeline for_rank(int rank) const;
  /// The file it was loaded from.
  [[nodiscard]] const std::filesystem::path& file() const noexcept;
  /// Every file read, following `extends:`: the most basic first, `file()` last.
  [[nodiscard]] const std::vector<std::string>& files() const noexcept;

  struct Impl;
  explicit Pipeline(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

/// The file that a --config value names. A value with a '/', a .yaml or .yml suffix, or
/// that is an existing file is a path, returned as it is. Anything else is a preset name:
/// <data>/presets/NAME.yaml (default_presets_dir(); never ./presets, so a name means the
/// same preset from every folder). An unknown name is a UsageError that lists the places
/// tried and the presets there.
std::filesystem::path resolve_pipeline_file(const std::string& name_or_path);

/// One command-line override: `key=value` as --set takes it (the value parsed as YAML), and
/// how the user wrote it, which is the value's origin in messages and --print-config
/// ("--set a.b=c", "--max-tokens 8").
struct Override {
  std::string assignment;  ///< "job.max_new_tokens=8"
  std::string origin;      ///< "--max-tokens 8"
};

/// Loads, merges and checks a pipeline (see the file comment); `file` goes through
/// resolve_pipeline_file() first, so a preset name works too. Overrides apply in order,
/// after every file. Throws UsageError.
Pipeline load_pipeline(const std::filesystem::path& file, const std::vector<Override>& overrides);
/// The same with --set texts ("a.b=c"), each its own origin ("--set a.b=c").
Pipeline load_pipeline(const std::filesystem::path& file, const std::vector<std::string>& sets = {});

/// The data folder's presets/ (k3/data_dir.hpp): what a preset name and --list-presets use.
std::filesystem::path default_presets_dir();
/// The data folder's configs/default.yaml: the pipeline of `serve` and `tokenize` without
/// --config, and the file whose model.demo_path is the demo location.
std::filesystem::path default_pipeline_file();

/// Every schema key, dotted, in schema order (including the file-level `extends`).
std::vector<std::string> pipeline_keys();
/// The key reference (a Markdown table: key, type, default, allowed values, meaning and why
/// the default) that docs/pipelines.md embeds; `k3host --print-schema` prints it.
std::string pipeline_schema_markdown();

/// A memory preset: a pipeline file in presets/.
struct PresetInfo {
  std::string name;         ///< file stem: "laptop"
  std::string description;  ///< the file's `description:`
  std::filesystem::path file;
  std::string trunk_gb;         ///< as written ("fit" for auto)
  std::string expert_cache_gb;  ///< as written
};
/// Every *.yaml in `dir`, loaded through load_pipeline, sorted by trunk budget then expert
/// cache ("fit" last). A folder that does not exist, or a preset that does not load, is a
/// UsageError.
std::vector<PresetInfo> list_presets(const std::filesystem::path& dir);

}  // namespace k3
