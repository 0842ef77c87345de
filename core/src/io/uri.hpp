// Checkpoint locations are URIs handed to the storage plugin: a local folder
// ("/data/Kimi-K3", "models/demo") or a URL ("https://host/Kimi-K3/"). A file's URI is built
// by string joining, never with std::filesystem::path, which would fold "https://" into
// "https:/" and treat the URL as a relative path.
//
// The names joined are file names of the checkpoint's folder: fixed ones (config.json) and
// the shard names a listing or the index JSON gives. A shard name must be a plain file name
// that means the same file to every backend (plain_name_problem()): no '/' or '\\' (another
// folder), no "." or "..", no control character, and no '%' (a server that decodes twice
// would read "%2e%2e%2f" as "../"). Joined to an http:// or https:// base the name is then
// percent-encoded as one path segment, so a space, '?' or '#' names the file and does not
// change the request.
#pragma once
#include <string>
#include <string_view>

namespace k3::io {

/// `base` + "/" + `name`, with exactly one slash between them whether or not `base` ends
/// with one ("dir" and "dir/" give "dir/name"; "https://h/m/" gives "https://h/m/name").
/// An empty base gives `name`. Under an http:// or https:// base every byte of `name` but
/// A-Z a-z 0-9 - . _ ~ is percent-encoded ("a b.safetensors" → "a%20b.safetensors").
std::string join_uri(std::string_view base, std::string_view name);

/// Why `name` is not a plain file name of a checkpoint folder (see above), or empty when it
/// is one.
std::string plain_name_problem(std::string_view name);

/// `name` fit for a message: control characters and DEL as \xNN, the rest as it is.
std::string shown_name(std::string_view name);

/// True for "<scheme>://..." (scheme: a letter, then letters, digits, '+', '-', '.').
bool has_uri_scheme(std::string_view text) noexcept;

}  // namespace k3::io
