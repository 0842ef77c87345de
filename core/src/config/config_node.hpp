// The pipeline loader's own tree: a YAML value plus where it was written. yaml-cpp nodes
// are read once into this form (yaml_reader.cpp) so that merging across `extends:` files
// and `--set` overrides keeps, for every value, the file, line and column that set it.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace k3::config {

/// Where a value (or a key) came from.
struct Origin {
  std::string file;           ///< display path ("presets/laptop.yaml"); empty for --set and defaults
  int line = 0;               ///< 1-based; 0 when there is no file position
  int column = 0;             ///< 1-based
  std::string label;          ///< "--set a.b=c", "--max-tokens 8" (a flag) or "default" when `file` is empty
  std::filesystem::path dir;  ///< absolute folder relative paths resolve against

  /// "presets/laptop.yaml:12:5", "--set a.b=c" or "default".
  [[nodiscard]] std::string str() const;
};

struct ConfigNode {
  enum class Kind { null, scalar, sequence, map };

  // Declared here, defaulted in config_node.cpp: `entries` holds pairs of this type, which
  // is complete only after the class; clang (with libstdc++) refuses implicit members
  // that would destroy std::pair<std::string, ConfigNode> inside the class itself.
  ConfigNode();
  ~ConfigNode();
  ConfigNode(const ConfigNode&);
  ConfigNode(ConfigNode&&) noexcept;
  ConfigNode& operator=(const ConfigNode&);
  ConfigNode& operator=(ConfigNode&&) noexcept;

  Kind kind = Kind::null;
  std::string text;               ///< scalar text (after ${VAR} expansion once that has run)
  std::string tag;                ///< explicit YAML tag, e.g. "!path"; empty when none
  bool expand_env = true;         ///< false for --set values (the shell already expanded them)
  Origin origin;                  ///< where the value starts
  Origin key_origin;              ///< where the key that holds it is written
  std::vector<ConfigNode> items;  ///< sequence items
  std::vector<std::pair<std::string, ConfigNode>> entries;  ///< map entries, in file order

  [[nodiscard]] bool is_map() const noexcept { return kind == Kind::map; }
  [[nodiscard]] bool is_scalar() const noexcept { return kind == Kind::scalar; }
  [[nodiscard]] bool is_null() const noexcept { return kind == Kind::null; }
  [[nodiscard]] bool is_sequence() const noexcept { return kind == Kind::sequence; }

  /// The entry `key` of a map, or nullptr.
  [[nodiscard]] ConfigNode* find(std::string_view key);
  [[nodiscard]] const ConfigNode* find(std::string_view key) const;
  /// Removes entry `key` of a map; true if it was there.
  bool erase(std::string_view key);
  /// Sets `node.origin` (and the key origin) of this node and everything below it.
  void set_origin_recursive(const Origin& where);
};

/// "a map", "a list", "a scalar 'x'", "null": for error messages.
std::string describe(const ConfigNode& node);

/// Later wins: maps merge entry by entry (recursively), anything else replaces.
void merge_into(ConfigNode& base, ConfigNode&& over);

}  // namespace k3::config
