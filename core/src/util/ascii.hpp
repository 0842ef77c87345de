// ASCII case folding for the names users type (log levels, plugin and preset names, YAML
// scalars, environment values): one definition for every place that compares them.
#pragma once
#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

namespace k3::util {

/// `text` with every ASCII letter in lower case (other bytes as they are; no locale).
inline std::string ascii_lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : static_cast<char>(c);
  });
  return out;
}

}  // namespace k3::util
