// Strict standard base64 (RFC 4648 §4, '=' padding required), as written in tiktoken rank
// files. Anything else is refused rather than skipped, so a corrupt line is noticed.
#pragma once
#include <string>
#include <string_view>

namespace k3::tiktoken {

/// Decodes `in` into `out` (replacing its content). False if `in` is not canonical base64.
bool decode_base64(std::string_view in, std::string& out);

}  // namespace k3::tiktoken
