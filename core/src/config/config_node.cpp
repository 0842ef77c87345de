#include "config/config_node.hpp"

#include <algorithm>

namespace k3::config {

std::string Origin::str() const {
  if (file.empty()) return label;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

ConfigNode::ConfigNode() = default;
ConfigNode::~ConfigNode() = default;
ConfigNode::ConfigNode(const ConfigNode&) = default;
ConfigNode::ConfigNode(ConfigNode&&) noexcept = default;
ConfigNode& ConfigNode::operator=(const ConfigNode&) = default;
ConfigNode& ConfigNode::operator=(ConfigNode&&) noexcept = default;

ConfigNode* ConfigNode::find(std::string_view key) {
  for (auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

const ConfigNode* ConfigNode::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

bool ConfigNode::erase(std::string_view key) {
  const auto it = std::find_if(entries.begin(), entries.end(), [&](const auto& e) { return e.first == key; });
  if (it == entries.end()) return false;
  entries.erase(it);
  return true;
}

void ConfigNode::set_origin_recursive(const Origin& where) {
  origin = where;
  key_origin = where;
  for (auto& item : items) item.set_origin_recursive(where);
  for (auto& [k, v] : entries) v.set_origin_recursive(where);
}

std::string describe(const ConfigNode& node) {
  switch (node.kind) {
    case ConfigNode::Kind::null: return "null";
    case ConfigNode::Kind::scalar: return "'" + node.text + "'";
    case ConfigNode::Kind::sequence: return "a list";
    case ConfigNode::Kind::map: return "a map";
  }
  return "?";
}

void merge_into(ConfigNode& base, ConfigNode&& over) {
  if (!base.is_map() || !over.is_map()) {
    base = std::move(over);
    return;
  }
  base.origin = over.origin;
  base.key_origin = over.key_origin;
  for (auto& [key, value] : over.entries) {
    if (ConfigNode* existing = base.find(key)) {
      merge_into(*existing, std::move(value));
    } else {
      base.entries.emplace_back(key, std::move(value));
    }
  }
}

}  // namespace k3::config
