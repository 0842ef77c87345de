// The pipeline schema: every key a pipeline may set, in one table (schema.cpp). It drives
// validation and defaults (validate.cpp), Pipeline::dump() and the key reference in
// docs/pipelines.md (schema_doc.cpp; a unit test keeps the doc equal to it).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace k3::config {

enum class ValueType {
  string,     ///< any text
  name,       ///< a plugin or geometry name: [A-Za-z0-9][A-Za-z0-9_.-]*
  choice,     ///< one of KeySpec::choices
  integer,    ///< int64
  number,     ///< finite double (integers accepted)
  boolean,    ///< true/false (yes/no, on/off accepted)
  budget,     ///< GB as a number, or "fit" (sized from available memory)
  path,       ///< a file or folder; relative = relative to the file that set it
  path_list,  ///< list of paths, each resolved like `path`
  int_list,   ///< list of integers (written as numbers or as strings)
  params,     ///< free-form map handed to a plugin as key -> string
};

/// Bounds for integer, number, budget and int_list items.
struct Range {
  std::optional<double> min;
  std::optional<double> max;
  bool min_open = false;  ///< true: value must be > min (else >= min)
  bool max_open = false;  ///< true: value must be < max (else <= max)
};

struct KeySpec {
  std::string_view key;  ///< dotted: "memory.trunk_gb"
  ValueType type;
  std::string_view default_yaml;  ///< the default, as YAML text ("''" is the empty string)
  Range range;
  std::vector<std::string_view> choices;  ///< for ValueType::choice
  std::string_view doc;                   ///< one line: what it means, with units
  std::string_view why;                   ///< why the default is what it is
  bool file_only = false;                 ///< read while loading files; not part of the merged pipeline
};

/// Every key, in the order dump() and the docs list them.
const std::vector<KeySpec>& schema();
/// The spec of a dotted key, or nullptr.
const KeySpec* find_key(std::string_view dotted);
/// True when `dotted` is a section: a proper prefix of some key ("memory", "job.sampling").
bool is_section(std::string_view dotted);
/// True when `dotted` lies inside a params map ("storage.params.block_size").
bool is_inside_params(std::string_view dotted);
/// The closest key or section to a misspelt one, for "did you mean"; empty when none is close.
std::string closest_key(std::string_view dotted);

std::string_view type_name(ValueType type);
/// "0 – 4096", ">= 0", "(0, 1]", "incremental, recompute"; empty when unbounded.
std::string range_text(const KeySpec& spec);

}  // namespace k3::config
