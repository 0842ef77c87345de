// k3::Pipeline: typed reads of a loaded pipeline (see pipeline_impl.hpp for the data).
#include <stdexcept>

#include <k3/error.hpp>
#include <k3/pipeline.hpp>

#include "config/pipeline_impl.hpp"
#include "config/rank_overrides.hpp"
#include "config/scalar_text.hpp"
#include "config/schema.hpp"
#include "config/validate.hpp"

namespace k3 {

namespace fs = std::filesystem;
using config::ConfigNode;
using config::KeySpec;
using config::ValueType;

namespace {

// Asking for a key outside the schema, or with the wrong getter, is a bug in the caller,
// not a configuration error.
[[noreturn]] void misuse(std::string_view key, const std::string& message) {
  throw std::logic_error("pipeline key '" + std::string(key) + "': " + message);
}

const KeySpec& spec_of(std::string_view key) {
  const KeySpec* spec = config::find_key(key);
  if (spec == nullptr || spec->file_only) misuse(key, "not a key of the pipeline schema");
  return *spec;
}

void expect_type(const KeySpec& spec, std::initializer_list<ValueType> types, std::string_view getter) {
  for (ValueType t : types)
    if (spec.type == t) return;
  misuse(spec.key, "is a " + std::string(config::type_name(spec.type)) + ", not readable with " + std::string(getter));
}

/// Flattens a params map: nested maps join keys with '.', lists join items with ',',
/// null entries (which clear an inherited value) are dropped.
void flatten(const ConfigNode& map, const std::string& prefix,
             std::vector<std::pair<std::string, const ConfigNode*>>& out) {
  for (const auto& [k, v] : map.entries) {
    const std::string key = prefix.empty() ? k : prefix + "." + k;
    if (v.is_map()) {
      flatten(v, key, out);
    } else if (!v.is_null()) {
      out.emplace_back(key, &v);
    }
  }
}

std::string flat_value(const ConfigNode& v) {
  if (v.is_scalar()) return v.text;
  std::string joined;
  for (const auto& item : v.items) joined += (joined.empty() ? "" : ",") + item.text;
  return joined;
}

}  // namespace

Pipeline::Pipeline() : impl_(std::make_unique<Impl>()) {}
Pipeline::~Pipeline() = default;
Pipeline::Pipeline(Pipeline&&) noexcept = default;
Pipeline& Pipeline::operator=(Pipeline&&) noexcept = default;
Pipeline::Pipeline(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Pipeline Pipeline::for_rank(int rank) const {
  auto impl = std::make_unique<Impl>(*impl_);
  impl->root = config::root_for_rank(impl_->root, rank, fs::current_path());
  return Pipeline(std::move(impl));
}

namespace {

const ConfigNode& node_of(const ConfigNode& root, const KeySpec& spec) {
  const ConfigNode* node = config::lookup(root, spec.key);
  if (node == nullptr) misuse(spec.key, "missing from a pipeline that was not loaded by load_pipeline");
  return *node;
}

/// The params entry for "storage.params.x", or nullptr; `key` must be inside a params map.
const ConfigNode* params_entry(const ConfigNode& root, std::string_view key) {
  for (const auto& spec : config::schema()) {
    if (spec.type != ValueType::params || key.size() <= spec.key.size() || key.substr(0, spec.key.size()) != spec.key ||
        key[spec.key.size()] != '.')
      continue;
    std::vector<std::pair<std::string, const ConfigNode*>> flat;
    flatten(node_of(root, spec), "", flat);
    const std::string_view sub = key.substr(spec.key.size() + 1);
    for (const auto& [k, v] : flat)
      if (k == sub) return v;
  }
  return nullptr;
}

}  // namespace

bool Pipeline::has(std::string_view key) const {
  const KeySpec* spec = config::find_key(key);
  if (spec != nullptr) return !spec->file_only && config::lookup(impl_->root, key) != nullptr;
  return config::is_inside_params(key) && params_entry(impl_->root, key) != nullptr;
}

std::string Pipeline::get_string(std::string_view key) const {
  const KeySpec& spec = spec_of(key);
  const ConfigNode& node = node_of(impl_->root, spec);
  if (!node.is_scalar()) misuse(key, "is a list or map; use get_strings or get_params");
  return node.text;
}

std::int64_t Pipeline::get_int(std::string_view key) const {
  const KeySpec& spec = spec_of(key);
  expect_type(spec, {ValueType::integer}, "get_int");
  return config::parse_int(node_of(impl_->root, spec).text).value();
}

double Pipeline::get_double(std::string_view key) const {
  const KeySpec& spec = spec_of(key);
  expect_type(spec, {ValueType::number, ValueType::integer, ValueType::budget}, "get_double");
  const auto v = config::parse_number(node_of(impl_->root, spec).text);
  if (!v) misuse(key, "is 'fit', not a number; use get_budget");
  return *v;
}

std::optional<double> Pipeline::get_budget(std::string_view key) const {
  const KeySpec& spec = spec_of(key);
  expect_type(spec, {ValueType::budget}, "get_budget");
  const ConfigNode& node = node_of(impl_->root, spec);
  if (node.text == "fit") return std::nullopt;
  return config::parse_number(node.text).value();
}

bool Pipeline::get_bool(std::string_view key) const {
  const KeySpec& spec = spec_of(key);
  expect_type(spec, {ValueType::boolean}, "get_bool");
  return node_of(impl_->root, spec).text == "true";
}

std::vector<std::string> Pipeline::get_strings(std::string_view key) const {
  const KeySpec& spec = spec_of(key);
  expect_type(spec, {ValueType::path_list, ValueType::int_list}, "get_strings");
  std::vector<std::string> out;
  for (const auto& item : node_of(impl_->root, spec).items) out.push_back(item.text);
  return out;
}

std::vector<std::int64_t> Pipeline::get_ints(std::string_view key) const {
  const KeySpec& spec = spec_of(key);
  expect_type(spec, {ValueType::int_list}, "get_ints");
  std::vector<std::int64_t> out;
  for (const auto& item : node_of(impl_->root, spec).items) out.push_back(config::parse_int(item.text).value());
  return out;
}

fs::path Pipeline::get_path(std::string_view key) const {
  const KeySpec& spec = spec_of(key);
  expect_type(spec, {ValueType::path}, "get_path");
  return fs::path(node_of(impl_->root, spec).text);
}

PluginParams Pipeline::get_params(std::string_view key) const {
  const KeySpec& spec = spec_of(key);
  expect_type(spec, {ValueType::params}, "get_params");
  std::vector<std::pair<std::string, const ConfigNode*>> flat;
  flatten(node_of(impl_->root, spec), "", flat);
  PluginParams out;
  for (const auto& [k, v] : flat) out.emplace_back(k, flat_value(*v));
  return out;
}

std::string Pipeline::where(std::string_view key) const {
  if (const KeySpec* spec = config::find_key(key); spec != nullptr && !spec->file_only)
    return node_of(impl_->root, *spec).origin.str();
  if (config::is_inside_params(key))
    if (const ConfigNode* entry = params_entry(impl_->root, key)) return entry->origin.str();
  misuse(key, "not a key of the pipeline schema, nor a parameter that was set");
}

fs::path Pipeline::source_file(std::string_view key) const {
  const KeySpec& spec = spec_of(key);
  const config::Origin& o = node_of(impl_->root, spec).origin;
  if (o.file.empty()) return {};
  return o.dir / fs::path(o.file).filename();  // o.dir is the folder of the file, absolute
}

void Pipeline::refuse(std::string_view key, const std::string& message) const {
  throw UsageError(where(key) + ": " + std::string(key) + ": " + message);
}

void Pipeline::at_key(std::string_view key, const std::function<void()>& work) const {
  try {
    work();
  } catch (const UsageError& e) {
    refuse(key, e.what());
  }
}

std::vector<fs::path> Pipeline::plugin_path() const {
  std::vector<fs::path> out;
  for (const auto& p : get_strings("plugin_path")) out.emplace_back(p);
  return out;
}

const fs::path& Pipeline::file() const noexcept { return impl_->file; }

const std::vector<std::string>& Pipeline::files() const noexcept { return impl_->files; }

}  // namespace k3
