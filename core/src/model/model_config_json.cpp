// config.json → ConfigTree (simdjson DOM; the file is a few KB).
#include <simdjson.h>

#include <k3/error.hpp>
#include <k3/json_depth.hpp>

#include "model/model_config_tree.hpp"

namespace k3::detail {
namespace {

void flatten(simdjson::dom::element e, const std::string& path, const std::string& file, ConfigTree& out) {
  ConfigValue v;
  v.where = file;
  switch (e.type()) {
    case simdjson::dom::element_type::OBJECT: {
      v.type = ConfigValue::Type::object;
      if (!path.empty()) out[path] = v;
      simdjson::dom::object obj;
      if (e.get_object().get(obj)) return;  // cannot happen: the type was just checked
      for (auto field : obj) {
        std::string key(field.key);
        flatten(field.value, path.empty() ? key : path + "." + key, file, out);
      }
      return;
    }
    case simdjson::dom::element_type::ARRAY: {
      v.type = ConfigValue::Type::int_list;
      simdjson::dom::array arr;
      if (e.get_array().get(arr)) return;
      for (auto item : arr) {
        if (item.type() == simdjson::dom::element_type::INT64) {
          v.list.push_back(item.get_int64().value_unsafe());
        } else if (item.type() == simdjson::dom::element_type::UINT64) {
          v.type = ConfigValue::Type::other;  // beyond int64: no key of ours holds such a value
          break;
        } else {
          v.type = ConfigValue::Type::other;
          break;
        }
      }
      if (v.type == ConfigValue::Type::other) v.list.clear();
      break;
    }
    case simdjson::dom::element_type::INT64:
      v.type = ConfigValue::Type::integer;
      v.integer = e.get_int64().value_unsafe();
      v.number = static_cast<double>(v.integer);
      break;
    case simdjson::dom::element_type::DOUBLE:
      v.type = ConfigValue::Type::number;
      v.number = e.get_double().value_unsafe();
      break;
    case simdjson::dom::element_type::BOOL:
      v.type = ConfigValue::Type::boolean;
      v.boolean = e.get_bool().value_unsafe();
      break;
    default:  // strings, null, uint64 beyond int64
      v.type = ConfigValue::Type::other;
      break;
  }
  out[path] = std::move(v);
}

}  // namespace

ConfigTree config_tree_from_json(const std::string& json_text, const std::string& file) {
  if (const auto deep = sdk::json_too_deep(json_text)) throw UsageError(sdk::json_depth_message(file, *deep));
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json_text);
  simdjson::dom::element root;
  if (auto err = parser.parse(padded).get(root); err)
    throw UsageError(file + ": not valid JSON (" + simdjson::error_message(err) + ")");
  if (root.type() != simdjson::dom::element_type::OBJECT)
    throw UsageError(file + ": the top level must be a JSON object");
  ConfigTree tree;
  flatten(root, "", file, tree);
  return tree;
}

}  // namespace k3::detail
