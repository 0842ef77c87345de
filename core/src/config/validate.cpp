#include "config/validate.hpp"

#include <cctype>

#include <k3/error.hpp>

#include "config/scalar_text.hpp"
#include "config/yaml_reader.hpp"
#include "io/uri.hpp"

namespace k3::config {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const Origin& where, std::string_view key, const std::string& message) {
  throw UsageError(where.str() + ": " + std::string(key) + ": " + message);
}

std::string join_key(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

void refuse_tag(const ConfigNode& node, std::string_view key) {
  if (!node.tag.empty())
    fail(node.origin, key, "YAML tag '" + node.tag + "' is not used here (only !path, on plugin params)");
}

bool in_range(const Range& r, double v) {
  if (r.min && (r.min_open ? !(v > *r.min) : !(v >= *r.min))) return false;
  if (r.max && (r.max_open ? !(v < *r.max) : !(v <= *r.max))) return false;
  return true;
}

void check_range(const KeySpec& spec, const ConfigNode& node, std::string_view key, double v) {
  if (!in_range(spec.range, v)) fail(node.origin, key, "must be in " + range_text(spec) + " (got " + node.text + ")");
}

const ConfigNode& require_scalar(const ConfigNode& node, std::string_view key, std::string_view expected) {
  if (!node.is_scalar()) fail(node.origin, key, "expected " + std::string(expected) + ", got " + describe(node));
  return node;
}

std::string resolve_path(const std::string& text, const Origin& origin) {
  // A URL ("https://host/Kimi-K3/") is for the storage plugin, not a relative path.
  if (text.empty() || io::has_uri_scheme(text)) return text;
  const fs::path p(text);
  return (p.is_absolute() ? p : origin.dir / p).lexically_normal().string();
}

void check_int(const KeySpec& spec, ConfigNode& node, std::string_view key) {
  require_scalar(node, key, "an integer");
  const auto v = parse_int(node.text);
  if (!v) fail(node.origin, key, "expected an integer, got '" + node.text + "'");
  check_range(spec, node, key, static_cast<double>(*v));
  node.text = std::to_string(*v);
}

void check_number(const KeySpec& spec, ConfigNode& node, std::string_view key, std::string_view expected) {
  require_scalar(node, key, expected);
  const auto v = parse_number(node.text);
  if (!v) fail(node.origin, key, "expected " + std::string(expected) + ", got '" + node.text + "'");
  check_range(spec, node, key, *v);
  node.text = format_number(*v);
}

bool is_name(std::string_view s) {
  if (s.empty() || std::isalnum(static_cast<unsigned char>(s[0])) == 0) return false;
  for (char c : s)
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_' && c != '.' && c != '-') return false;
  return true;
}

/// A params map: scalars (a `!path` scalar is resolved), lists of scalars, nested maps,
/// and null (which removes an inherited entry when the params are flattened).
void check_params(ConfigNode& node, const std::string& key) {
  for (auto& [k, v] : node.entries) {
    const std::string sub = key + "." + k;
    if (k.empty()) fail(v.key_origin, sub, "empty parameter name");
    switch (v.kind) {
      case ConfigNode::Kind::null: break;
      case ConfigNode::Kind::scalar:
        if (v.tag == "!path") {
          v.text = resolve_path(v.text, v.origin);
          v.tag.clear();
        }
        refuse_tag(v, sub);
        break;
      case ConfigNode::Kind::sequence:
        refuse_tag(v, sub);
        for (auto& item : v.items) {
          refuse_tag(item, sub);
          if (!item.is_scalar()) fail(item.origin, sub, "a parameter list holds plain values, got " + describe(item));
        }
        break;
      case ConfigNode::Kind::map:
        refuse_tag(v, sub);
        check_params(v, sub);
        break;
    }
  }
}

void check_list(const KeySpec& spec, ConfigNode& node, std::string_view key) {
  if (node.is_null()) {
    node.kind = ConfigNode::Kind::sequence;
    return;
  }
  if (!node.is_sequence()) fail(node.origin, key, "expected a list (e.g. [a, b]), got " + describe(node));
  for (auto& item : node.items) {
    refuse_tag(item, key);
    if (spec.type == ValueType::int_list) {
      check_int(spec, item, key);
    } else {
      require_scalar(item, key, "a path");
      if (item.text.empty()) fail(item.origin, key, "empty path in the list");
      item.text = resolve_path(item.text, item.origin);
    }
  }
}

/// Walks the tree: every entry is a schema key, a section holding keys, or unknown.
void check_map(ConfigNode& map, const std::string& prefix) {
  for (auto& [k, v] : map.entries) {
    const std::string key = join_key(prefix, k);
    if (const KeySpec* spec = find_key(key); spec != nullptr && !spec->file_only) {
      check_value(*spec, v);
    } else if (is_section(key)) {
      refuse_tag(v, key);
      if (v.is_null()) {
        v.kind = ConfigNode::Kind::map;  // `memory:` with nothing under it
      } else if (!v.is_map()) {
        fail(v.origin, key, "expected a section (a map of keys), got " + describe(v));
      }
      check_map(v, key);
    } else if (spec != nullptr) {
      fail(v.key_origin, key, "'" + key + "' is only read while loading a file and must be at the top level");
    } else {
      const std::string near = closest_key(key);
      fail(v.key_origin, key, "unknown key" + (near.empty() ? std::string() : " (did you mean '" + near + "'?)"));
    }
  }
}

ConfigNode& ensure_path(ConfigNode& root, std::string_view dotted, const Origin& where) {
  ConfigNode* node = &root;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = dotted.find('.', start);
    const std::string part(dotted.substr(start, dot == std::string_view::npos ? dotted.npos : dot - start));
    ConfigNode* child = node->find(part);
    if (child == nullptr) {
      ConfigNode fresh;
      fresh.kind = ConfigNode::Kind::map;
      fresh.origin = where;
      fresh.key_origin = where;
      node->entries.emplace_back(part, std::move(fresh));
      child = &node->entries.back().second;
    }
    node = child;
    if (dot == std::string_view::npos) return *node;
    start = dot + 1;
  }
}

void check_cross_keys(const ConfigNode& root) {
  const ConfigNode* mode = lookup(root, "job.mode");
  for (const char* key : {"job.save_state", "job.load_state"}) {
    const ConfigNode* state = lookup(root, key);
    if (state != nullptr && !state->text.empty() && mode != nullptr && mode->text != "incremental")
      fail(state->origin, key,
           "needs job.mode incremental (job.mode is '" + mode->text + "', set at " + mode->origin.str() + ")");
  }
}

}  // namespace

void check_value(const KeySpec& spec, ConfigNode& node) {
  const std::string_view key = spec.key;
  if (spec.type != ValueType::params) refuse_tag(node, key);
  switch (spec.type) {
    case ValueType::string:
    case ValueType::path:
      if (node.is_null()) {
        node.kind = ConfigNode::Kind::scalar;
        node.text.clear();
      }
      require_scalar(node, key, spec.type == ValueType::path ? "a path" : "text");
      if (spec.type == ValueType::path) node.text = resolve_path(node.text, node.origin);
      break;
    case ValueType::name:
      require_scalar(node, key, "a name");
      if (!is_name(node.text))
        fail(node.origin, key, "expected a name (letters, digits, '_', '.', '-'), got '" + node.text + "'");
      break;
    case ValueType::choice: {
      require_scalar(node, key, "one of " + range_text(spec));
      bool known = false;
      for (const auto& c : spec.choices) known = known || node.text == c;
      if (!known) fail(node.origin, key, "must be one of " + range_text(spec) + " (got '" + node.text + "')");
      break;
    }
    case ValueType::integer: check_int(spec, node, key); break;
    case ValueType::number: check_number(spec, node, key, "a number"); break;
    case ValueType::budget:
      require_scalar(node, key, "a size in GB or 'fit'");
      if (node.text != "fit") check_number(spec, node, key, "a size in GB or 'fit'");
      break;
    case ValueType::boolean: {
      require_scalar(node, key, "true or false");
      const auto v = parse_bool(node.text);
      if (!v) fail(node.origin, key, "expected true or false, got '" + node.text + "'");
      node.text = *v ? "true" : "false";
      break;
    }
    case ValueType::path_list:
    case ValueType::int_list: check_list(spec, node, key); break;
    case ValueType::params:
      refuse_tag(node, key);
      if (node.is_null()) node.kind = ConfigNode::Kind::map;
      if (!node.is_map()) fail(node.origin, key, "expected a map of plugin parameters, got " + describe(node));
      check_params(node, std::string(key));
      break;
  }
}

void validate_and_complete(ConfigNode& root, const fs::path& cwd) {
  check_map(root, "");
  Origin default_origin;
  default_origin.label = "default";
  default_origin.dir = cwd;
  for (const auto& spec : schema()) {
    if (spec.file_only || lookup(root, spec.key) != nullptr) continue;
    ConfigNode value = parse_override_value(std::string(spec.default_yaml), default_origin);
    check_value(spec, value);
    ConfigNode& slot = ensure_path(root, spec.key, default_origin);
    slot = std::move(value);
  }
  check_cross_keys(root);
}

const ConfigNode* lookup(const ConfigNode& root, std::string_view dotted) {
  const ConfigNode* node = &root;
  std::size_t start = 0;
  while (node != nullptr && node->is_map()) {
    const std::size_t dot = dotted.find('.', start);
    node = node->find(dotted.substr(start, dot == std::string_view::npos ? dotted.npos : dot - start));
    if (dot == std::string_view::npos) return node;
    start = dot + 1;
  }
  return nullptr;
}

ConfigNode* lookup(ConfigNode& root, std::string_view dotted) {
  return const_cast<ConfigNode*>(lookup(static_cast<const ConfigNode&>(root), dotted));
}

}  // namespace k3::config
