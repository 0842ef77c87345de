// Checkpoint locations are URIs handed to the storage plugin: a local folder
// ("/data/Kimi-K3", "models/demo") or a URL ("https://host/Kimi-K3/"). A file's URI is built
// by string joining, never with std::filesystem::path, which would fold "https://" into
// "https:/" and treat the URL as a relative path.
#pragma once
#include <string>
#include <string_view>

namespace k3::io {

/// `base` + "/" + `name`, with exactly one slash between them whether or not `base` ends
/// with one ("dir" and "dir/" give "dir/name"; "https://h/m/" gives "https://h/m/name").
/// An empty base gives `name`.
std::string join_uri(std::string_view base, std::string_view name);

/// True for "<scheme>://..." (scheme: a letter, then letters, digits, '+', '-', '.').
bool has_uri_scheme(std::string_view text) noexcept;

}  // namespace k3::io
