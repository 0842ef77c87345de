// The JSON side of K3 tool use: the tool declaration text, a call's arguments split into
// XTML <argument> elements, and the way back from arguments to OpenAI's JSON text.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace k3::chat::detail {

/// One <argument key=".." type="..">text</argument>. `text` is the decoded string for a
/// string value, else the value's JSON literal exactly as it was written (1e2 stays 1e2).
struct Argument {
  std::string key;
  std::string type;  ///< string, number, boolean, null, object or array
  std::string text;
  bool operator==(const Argument&) const = default;
};

/// The arguments of a call, one level deep. nullopt when `arguments` is not one well-formed
/// JSON object: the reference then renders it verbatim in a <json type="object"> element.
/// "" is an empty list. Anything after the closing brace is ignored, duplicate keys are all
/// kept, as the reference does.
std::optional<std::vector<Argument>> split_arguments(std::string_view arguments);

/// OpenAI's arguments text for parsed <argument> elements: a JSON object with Python's
/// default separators (", ", ": "), string values escaped, other values as written.
/// Throws std::invalid_argument when a value is not JSON of its declared type.
std::string join_arguments(const std::vector<Argument>& arguments);

/// The tools array as the declaration message carries it: keys sorted at every depth,
/// compact separators, non-ASCII kept raw. "" for an empty array. Throws
/// std::invalid_argument for text that is not a JSON array.
std::string declared_tools(std::string_view tools);

}  // namespace k3::chat::detail
