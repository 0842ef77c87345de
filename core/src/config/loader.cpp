// load_pipeline(): files and `extends:` chains -> one tree, then --set, ${VAR}, the schema.
#include <algorithm>
#include <memory>
#include <string_view>

#include <simdjson.h>

#include <k3/error.hpp>
#include <k3/pipeline.hpp>

#include "config/env_expand.hpp"
#include "config/pipeline_impl.hpp"
#include "config/rank_overrides.hpp"
#include "config/schema.hpp"
#include "config/validate.hpp"
#include "config/yaml_reader.hpp"

namespace k3 {

namespace fs = std::filesystem;
using config::ConfigNode;
using config::Origin;

namespace {

[[noreturn]] void fail(const Origin& where, std::string_view key, const std::string& message) {
  throw UsageError(where.str() + ": " + std::string(key) + ": " + message);
}

/// Follows `extends:` depth first. `stack` holds the files being loaded (for cycles);
/// `files` collects every file read, most basic first.
class ChainLoader {
 public:
  ConfigNode load(const fs::path& path, const std::string& display, const Origin* extended_from) {
    std::error_code ec;
    fs::path id = fs::weakly_canonical(fs::absolute(path), ec);
    if (ec) id = fs::absolute(path).lexically_normal();
    const auto seen = std::find_if(stack_.begin(), stack_.end(), [&](const auto& e) { return e.first == id; });
    if (seen != stack_.end()) {
      std::string cycle;
      for (auto it = seen; it != stack_.end(); ++it) cycle += it->second + " -> ";
      fail(*extended_from, "extends", "cycle: " + cycle + display);
    }
    if (extended_from != nullptr && !fs::is_regular_file(path, ec))
      fail(*extended_from, "extends",
           "'" + display + "' " + (fs::exists(path, ec) ? "is not a file" : "does not exist"));

    ConfigNode node = config::read_pipeline_file(path, display);
    ConfigNode* extends = node.find("extends");
    if (extends == nullptr) {
      files_.push_back(display);
      return node;
    }
    if (!extends->is_scalar() || extends->text.empty())
      fail(extends->origin, "extends", "expected the path of one pipeline file, got " + config::describe(*extends));
    const Origin where = extends->origin;
    const fs::path target(config::expand_env(extends->text, where, "extends"));
    node.erase("extends");

    const fs::path base_path = target.is_absolute() ? target : fs::absolute(path).parent_path() / target;
    const std::string base_display =
        target.is_absolute() ? target.string() : (fs::path(display).parent_path() / target).lexically_normal().string();
    stack_.emplace_back(id, display);
    ConfigNode base = load(base_path, base_display, &where);
    stack_.pop_back();
    files_.push_back(display);
    config::merge_into(base, std::move(node));
    return base;
  }

  std::vector<std::string> take_files() { return std::move(files_); }

 private:
  std::vector<std::pair<fs::path, std::string>> stack_;
  std::vector<std::string> files_;
};

/// True for a value the command line gave (--set or a flag such as --max-tokens).
bool from_set(const Origin& o) { return o.file.empty() && o.label != "default"; }

/// The rule that makes --set compose (docs/pipelines.md, "--set"): a later --set replaces
/// a value or merges into a map, key by key; it never goes inside a value (a.b=x, then
/// a.b.c=y) and never replaces a map that an earlier --set built with a value (a.b.c=y,
/// then a.b=x): either would silently drop what the other said, so both are refused,
/// naming the two places.
void check_composes(const ConfigNode& root, const std::string& key, const ConfigNode& value, const Origin& where) {
  const ConfigNode* node = &root;
  std::size_t begin = 0;
  while (true) {
    const std::size_t dot = key.find('.', begin);
    const std::string part = key.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
    const ConfigNode* next = node->is_map() ? node->find(part) : nullptr;
    if (next == nullptr) return;  // new from here on
    const std::string prefix = key.substr(0, dot);
    if (dot == std::string::npos) {
      if (next->is_map() && !value.is_map() && !next->entries.empty() && from_set(next->origin))
        fail(where, key,
             "would replace the map that " + next->origin.str() +
                 " built with a value; give the whole map in one --set, or drop one of them");
      return;
    }
    if (!next->is_map() && !next->is_null())
      fail(where, key,
           "goes inside " + prefix + ", which is " + config::describe(*next) + " (from " + next->origin.str() +
               "), not a map; set " + prefix + " as a map instead, e.g. --set '" + prefix + "={" + key.substr(dot + 1) +
               ": ...}'");
    node = next;
    begin = dot + 1;
  }
}

/// `--set a.b=c` (or a flag that stands for one): the value parsed as YAML, merged over the
/// tree like one more file.
void apply_override(ConfigNode& root, const Override& o, const fs::path& cwd) {
  const std::string& text = o.assignment;
  Origin where;
  where.label = o.origin;
  where.dir = cwd;
  // Checked before anything echoes the text: YAML is Unicode, and a value that is not UTF-8
  // would not survive Pipeline::dump and a reload.
  if (!simdjson::validate_utf8(text.data(), text.size()))
    throw UsageError(where.label.substr(0, where.label.find(' ')) + ": the value is not UTF-8 text");
  const std::size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UsageError(where.label + ": expected key=value (e.g. --set memory.expert_cache_gb=2)");
  const std::string key = text.substr(0, eq);
  if (key.front() == '.' || key.back() == '.' || key.find("..") != std::string::npos)
    fail(where, key, "not a dotted key like memory.trunk_gb");
  if (key == "extends") fail(where, key, "extends can only be written in a pipeline file");
  if (config::find_key(key) == nullptr && !config::is_section(key) && !config::is_inside_params(key)) {
    const std::string near = config::closest_key(key);
    fail(where, key, "unknown key" + (near.empty() ? std::string() : " (did you mean '" + near + "'?)"));
  }

  ConfigNode value = config::parse_override_value(text.substr(eq + 1), where);
  check_composes(root, key, value, where);
  // Wrap the value in one map per key part, innermost first: a.b=c -> {a: {b: c}}.
  std::size_t end = key.size();
  while (true) {
    const std::size_t dot = key.rfind('.', end - 1);
    const std::size_t begin = dot == std::string::npos ? 0 : dot + 1;
    ConfigNode wrapper;
    wrapper.kind = ConfigNode::Kind::map;
    wrapper.origin = where;
    wrapper.key_origin = where;
    wrapper.expand_env = false;
    wrapper.entries.emplace_back(key.substr(begin, end - begin), std::move(value));
    value = std::move(wrapper);
    if (dot == std::string::npos) break;
    end = dot;
  }
  config::merge_into(root, std::move(value));
}

/// The word that, as model.path, stands for the synthetic demo checkpoint (docs/pipelines.md).
constexpr std::string_view kDemoWord = "demo";

/// True when model.path, before paths are resolved, selects the demo: the word `demo`, or
/// no model.path at all (the schema default is that word). Anything malformed is left for
/// the schema check to report.
bool selects_demo(const ConfigNode& root) {
  const ConfigNode* model = root.is_map() ? root.find("model") : nullptr;
  if (model == nullptr) return true;
  if (!model->is_map()) return false;
  const ConfigNode* path = model->find("path");
  return path == nullptr || (path->is_scalar() && path->text == kDemoWord);
}

/// How late a value was set: the schema default first, then each file in `files` (most
/// basic first), then the command line.
int precedence(const Origin& o, const std::vector<std::string>& files) {
  if (from_set(o)) return static_cast<int>(files.size());
  const auto it = std::find(files.begin(), files.end(), o.file);
  return it == files.end() ? -1 : static_cast<int>(it - files.begin());
}

/// After validation: model.path takes model.demo_path's folder (keeping its own origin, so
/// messages still say "-m demo" or the file line), and model.geometry becomes demo and
/// memory.budgets_for k3 (the demo stands in for K3: a preset's budgets are scaled to it)
/// unless each was set where model.path was or later: a preset's geometry belongs to the
/// preset's model, not to the synthetic one, but `path: demo` with `geometry: tiny` in one
/// file means tiny.
void select_demo(ConfigNode& root, const std::vector<std::string>& files) {
  ConfigNode& path = *config::lookup(root, "model.path");
  path.text = config::lookup(root, "model.demo_path")->text;
  const std::pair<const char*, std::string_view> implied[] = {{"model.geometry", kDemoWord},
                                                              {"memory.budgets_for", "k3"}};
  for (const auto& [key, value] : implied) {
    ConfigNode& node = *config::lookup(root, key);
    if (precedence(node.origin, files) < precedence(path.origin, files)) {
      node.text = std::string(value);
      node.origin = path.origin;
    }
  }
}

}  // namespace

Pipeline load_pipeline(const fs::path& name_or_file, const std::vector<std::string>& sets) {
  std::vector<Override> overrides;
  for (const auto& text : sets) overrides.push_back({text, "--set " + text});
  return load_pipeline(name_or_file, overrides);
}

Pipeline load_pipeline(const fs::path& name_or_file, const std::vector<Override>& overrides) {
  const fs::path cwd = fs::current_path();
  const fs::path file = resolve_pipeline_file(name_or_file.string());
  ChainLoader chain;
  auto impl = std::make_unique<Pipeline::Impl>();
  impl->file = file;
  impl->root = chain.load(file, file.lexically_normal().string(), nullptr);
  impl->files = chain.take_files();
  // Files first, so an unset ${VAR} in a value a --set replaces is not an error.
  for (const auto& o : overrides) apply_override(impl->root, o, cwd);
  config::expand_env_tree(impl->root, "");
  const bool demo = selects_demo(impl->root);
  config::validate_and_complete(impl->root, cwd);
  if (demo) select_demo(impl->root, impl->files);
  config::check_rank_overrides(impl->root, cwd);
  return Pipeline(std::move(impl));
}

}  // namespace k3
