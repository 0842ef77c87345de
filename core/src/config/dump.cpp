// Pipeline::dump(): the merged pipeline as YAML, every schema key in schema order, each
// with a comment saying where its value was set. Loading the output gives the same values
// (paths are written resolved, so the dump can live anywhere).
#include <yaml-cpp/yaml.h>

#include <k3/pipeline.hpp>

#include "config/pipeline_impl.hpp"
#include "config/scalar_text.hpp"
#include "config/schema.hpp"
#include "config/validate.hpp"

namespace k3 {

using config::ConfigNode;
using config::KeySpec;
using config::ValueType;

namespace {

std::vector<std::string> split_key(std::string_view key) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t dot = key.find('.'); dot != std::string_view::npos; dot = key.find('.', start)) {
    parts.emplace_back(key.substr(start, dot - start));
    start = dot + 1;
  }
  parts.emplace_back(key.substr(start));
  return parts;
}

/// Text that a YAML reader would take for a number, a boolean or null when written plain.
bool looks_typed(const std::string& text) {
  return text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL" ||
         config::parse_number(text).has_value() || config::parse_bool(text).has_value();
}


/// The text as a pipeline file must spell it: loading expands ${...} in every value from a
/// file, and the values dumped are already expanded, so a literal "${" is written "$${".
std::string escape_env(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 2, "${") == 0) out += '$';
    out += text[i];
  }
  return out;
}

/// Quotes text that would read back as another type. Plugin parameters reach the plugin
/// as text whatever their YAML type, so for them only null-looking text needs quotes.
void emit_text(YAML::Emitter& out, const std::string& text, bool only_null = false) {
  const bool nullish = text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL";
  if (only_null ? nullish : looks_typed(text)) out << YAML::DoubleQuoted;
  out << escape_env(text);
}

void emit_params(YAML::Emitter& out, const ConfigNode& map, const std::string& prefix) {
  for (const auto& [k, v] : map.entries) {
    const std::string key = prefix.empty() ? k : prefix + "." + k;
    if (v.is_map()) {
      emit_params(out, v, key);
      continue;
    }
    if (v.is_null()) continue;  // a cleared inherited parameter
    out << YAML::Key << key << YAML::Value;
    if (v.is_scalar()) {
      emit_text(out, v.text, true);
    } else {
      out << YAML::Flow << YAML::BeginSeq;
      for (const auto& item : v.items) emit_text(out, item.text, true);
      out << YAML::EndSeq;
    }
    out << YAML::Comment(v.origin.str());
  }
}

bool has_params(const ConfigNode& map) {
  for (const auto& [k, v] : map.entries)
    if (v.is_map() ? has_params(v) : !v.is_null()) return true;
  return false;
}

void emit_value(YAML::Emitter& out, const KeySpec& spec, const ConfigNode& node) {
  switch (spec.type) {
    case ValueType::integer:
    case ValueType::number:
    case ValueType::boolean:
    case ValueType::budget: out << node.text; break;
    case ValueType::string:
    case ValueType::name:
    case ValueType::choice:
    case ValueType::path: emit_text(out, node.text); break;
    case ValueType::path_list:
    case ValueType::int_list:
      out << YAML::Flow << YAML::BeginSeq;
      for (const auto& item : node.items) {
        if (spec.type == ValueType::int_list) {
          out << item.text;
        } else {
          emit_text(out, item.text);
        }
      }
      out << YAML::EndSeq;
      break;
    case ValueType::params:
      if (!has_params(node)) {
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        break;
      }
      out << YAML::BeginMap;
      emit_params(out, node, "");
      out << YAML::EndMap;
      return;  // each entry carries its own origin
  }
  out << YAML::Comment(node.origin.str());
}

}  // namespace

std::string Pipeline::dump() const {
  YAML::Emitter out;
  out.SetIndent(2);
  std::string header = "# k3host pipeline: " + impl_->file.string();
  if (impl_->files.size() > 1) {
    header += " (files:";
    for (const auto& f : impl_->files) header += " " + f;
    header += ")";
  }
  header += "\n# every key after extends, ${VAR} and --set; the comment says where each value was set\n";

  out << YAML::BeginMap;
  std::vector<std::string> open;  // sections currently open
  for (const auto& spec : config::schema()) {
    if (spec.file_only) continue;
    std::vector<std::string> parts = split_key(spec.key);
    const std::string leaf = parts.back();
    parts.pop_back();
    std::size_t shared = 0;
    while (shared < open.size() && shared < parts.size() && open[shared] == parts[shared]) ++shared;
    while (open.size() > shared) {
      out << YAML::EndMap;
      open.pop_back();
    }
    for (std::size_t i = shared; i < parts.size(); ++i) {
      out << YAML::Key << parts[i] << YAML::Value << YAML::BeginMap;
      open.push_back(parts[i]);
    }
    const ConfigNode* node = config::lookup(impl_->root, spec.key);
    if (node == nullptr) continue;
    out << YAML::Key << leaf << YAML::Value;
    emit_value(out, spec, *node);
  }
  while (!open.empty()) {
    out << YAML::EndMap;
    open.pop_back();
  }
  out << YAML::EndMap;
  return header + out.c_str() + "\n";
}

}  // namespace k3
