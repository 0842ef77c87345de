// ${VAR} and ${VAR:-default} in pipeline values (docs/pipelines.md).
#pragma once
#include <string>
#include <string_view>

#include "config/config_node.hpp"

namespace k3::config {

/// Expands `text` from the environment:
///   ${NAME}            the variable's value; unset is an error ("where: key: ... not set")
///   ${NAME:-fallback}  the value, or `fallback` when unset or empty; the fallback is
///                      text that may hold ${...} itself (expanded only when it is used):
///                      ${XDG_DATA_HOME:-${HOME}/.local/share}
///   $${                a literal "${"
/// A '$' not followed by '{' is kept as is. NAME is [A-Za-z_][A-Za-z0-9_]*. The result is
/// text: it is not parsed as YAML again.
std::string expand_env(std::string_view text, const Origin& where, std::string_view key);

/// Expands every scalar below `node` that came from a file (not from --set). `key` is the
/// dotted key of `node`, for messages.
void expand_env_tree(ConfigNode& node, const std::string& key);

}  // namespace k3::config
