// Python's json module is the reference here (the official encoder is Python); where
// nlohmann::json reads or writes differently the difference is named in docs/chat.md.
#include "chat/tool_json.hpp"

#include <stdexcept>

#include <nlohmann/json.hpp>

#include <k3/json_depth.hpp>

namespace k3::chat::detail {
namespace {

using nlohmann::json;

// The whitespace Python's object decoder skips between tokens.
std::size_t skip_space(std::string_view s, std::size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  return i;
}

// The end of the one JSON value starting at i (json.JSONDecoder.raw_decode's offset): the
// extent is found by scanning, the value itself is then checked by a real parse.
std::optional<std::size_t> value_end(std::string_view s, std::size_t i) {
  const std::size_t n = s.size();
  if (i >= n) return std::nullopt;
  auto string_end = [&](std::size_t j) -> std::optional<std::size_t> {
    for (++j; j < n; ++j) {
      if (s[j] == '\\')
        ++j;
      else if (s[j] == '"')
        return j + 1;
    }
    return std::nullopt;
  };
  if (s[i] == '"') return string_end(i);
  if (s[i] == '{' || s[i] == '[') {
    int depth = 0;
    for (std::size_t j = i; j < n; ++j) {
      if (s[j] == '"') {
        auto e = string_end(j);
        if (!e) return std::nullopt;
        j = *e - 1;
      } else if (s[j] == '{' || s[j] == '[') {
        ++depth;
      } else if (s[j] == '}' || s[j] == ']') {
        if (--depth == 0) return j + 1;
      }
    }
    return std::nullopt;
  }
  std::size_t j = i;
  while (j < n && ((s[j] >= '0' && s[j] <= '9') || (s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z') ||
                   s[j] == '-' || s[j] == '+' || s[j] == '.'))
    ++j;
  if (j == i) return std::nullopt;
  return j;
}

// A value nested deeper than the one JSON bound is not taken apart: it stays text.
std::optional<json> parse_value(std::string_view text) {
  if (sdk::json_too_deep(text)) return std::nullopt;
  json v = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return std::nullopt;
  return v;
}

std::string type_of(const json& v) {
  if (v.is_boolean()) return "boolean";
  if (v.is_null()) return "null";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_object()) return "object";
  return "array";
}

std::string dump_string(const std::string& s) { return json(s).dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

std::optional<std::vector<Argument>> split_arguments(std::string_view s) {
  std::vector<Argument> out;
  if (s.empty()) return out;
  std::size_t i = skip_space(s, 0);
  if (i >= s.size() || s[i] != '{') return std::nullopt;
  i = skip_space(s, i + 1);
  if (i >= s.size()) return std::nullopt;
  if (s[i] == '}') return out;
  for (;;) {
    const auto key_end = value_end(s, i);
    if (!key_end || s[i] != '"') return std::nullopt;
    const auto key = parse_value(s.substr(i, *key_end - i));
    if (!key || !key->is_string()) return std::nullopt;
    i = skip_space(s, *key_end);
    if (i >= s.size() || s[i] != ':') return std::nullopt;
    i = skip_space(s, i + 1);
    const auto end = value_end(s, i);
    if (!end) return std::nullopt;
    const std::string_view literal = s.substr(i, *end - i);
    const auto value = parse_value(literal);
    if (!value) return std::nullopt;
    out.push_back({key->get<std::string>(), type_of(*value),
                   value->is_string() ? value->get<std::string>() : std::string(literal)});
    i = skip_space(s, *end);
    if (i >= s.size()) return std::nullopt;
    const char separator = s[i];
    i = skip_space(s, i + 1);
    if (separator == '}') return out;
    if (separator != ',') return std::nullopt;
  }
}

std::string join_arguments(const std::vector<Argument>& arguments) {
  std::string out = "{";
  for (std::size_t k = 0; k < arguments.size(); ++k) {
    const Argument& a = arguments[k];
    if (k > 0) out += ", ";
    out += dump_string(a.key) + ": ";
    if (a.type == "string") {
      out += dump_string(a.text);
      continue;
    }
    const auto v = parse_value(a.text);
    if (!v || type_of(*v) != a.type)
      throw std::invalid_argument("argument \"" + a.key + "\" is not JSON of type " + a.type);
    out += a.text;
  }
  return out + "}";
}

std::string declared_tools(std::string_view tools) {
  if (const auto deep = sdk::json_too_deep(tools)) throw std::invalid_argument(sdk::json_depth_message("tools", *deep));
  const auto v = parse_value(tools);
  if (!v || !v->is_array()) throw std::invalid_argument("tools must be a JSON array");
  if (v->empty()) return {};
  // nlohmann's objects are std::maps: keys come out sorted by bytes, which for UTF-8 is
  // Python's code-point order (sort_keys=True).
  return v->dump(-1, ' ', false, json::error_handler_t::strict);
}

}  // namespace k3::chat::detail
