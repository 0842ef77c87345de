// yaml-cpp in, ConfigNode out. The only place the loader touches yaml-cpp's reading API.
#pragma once
#include <filesystem>
#include <string>

#include "config/config_node.hpp"

namespace k3::config {

/// Reads one pipeline file: exactly one YAML document whose top level is a map (an empty
/// file is an empty map). `display` is the path used in messages. Syntax errors, duplicate
/// keys, complex keys and a non-map top level are UsageErrors "display:line:col: ...".
ConfigNode read_pipeline_file(const std::filesystem::path& path, const std::string& display);

/// Parses a `--set` value as YAML (a scalar or a flow list/map). Every node gets `where`
/// and is marked as already expanded. A syntax error is a UsageError naming `where`.
ConfigNode parse_override_value(const std::string& text, const Origin& where);

}  // namespace k3::config
