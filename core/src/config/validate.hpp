// Checks a merged pipeline tree against the schema and completes it.
#pragma once
#include <filesystem>

#include "config/config_node.hpp"
#include "config/schema.hpp"

namespace k3::config {

/// After merging and ${VAR} expansion: refuses unknown keys, wrong types and out-of-range
/// values (UsageError "where: key: message"), rewrites every value in canonical form
/// (integers and numbers normalised, booleans true/false, null strings and lists empty,
/// relative paths made absolute against the folder of the file that set them — `cwd` for
/// --set and defaults — and `!path` params resolved the same way), adds every missing key
/// with its default, and checks the rules that join keys (e.g. job.load_state needs
/// job.mode incremental).
void validate_and_complete(ConfigNode& root, const std::filesystem::path& cwd);

/// Checks and canonicalises one value against its spec (used for defaults too).
void check_value(const KeySpec& spec, ConfigNode& node);

/// The node of a dotted key in a completed tree, or nullptr.
const ConfigNode* lookup(const ConfigNode& root, std::string_view dotted);
ConfigNode* lookup(ConfigNode& root, std::string_view dotted);

}  // namespace k3::config
