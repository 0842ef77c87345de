// The keys of a model configuration as a flat map "text_config.hidden_size" → value, built
// from either a checkpoint's config.json (JSON) or a geometry file (YAML). One validator
// (model_config_from_tree) turns it into a ModelConfig, so both sources are refused by the
// same rules with the same messages.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <k3/model_config.hpp>

namespace k3::detail {

struct ConfigValue {
  enum class Type { integer, number, boolean, int_list, object, other };
  Type type = Type::other;
  std::int64_t integer = 0;
  double number = 0;  ///< also set for integers
  bool boolean = false;
  std::vector<std::int64_t> list;
  std::string where;  ///< "file" (JSON) or "file:line:col" (YAML): the prefix of an error message
};

/// Dotted key path → value. An object has its own entry (type object) and its members
/// follow under "<path>."; arrays of integers become int_list; anything else is `other` (present, but of no type we
/// read).
using ConfigTree = std::map<std::string, ConfigValue>;

/// Parses config.json text; UsageError "<file>: <what>" when it is not a JSON object.
ConfigTree config_tree_from_json(const std::string& json_text, const std::string& file);

/// Validates and converts. Nested shape when the tree has a "text_config" object, flat
/// otherwise. UsageError "<where>: <key path>: <what>" (all missing keys in one message).
ModelConfig model_config_from_tree(const ConfigTree& tree, const std::string& file);

}  // namespace k3::detail
