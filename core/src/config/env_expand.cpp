#include "config/env_expand.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <k3/error.hpp>

namespace k3::config {

namespace {

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

[[noreturn]] void fail(const Origin& where, std::string_view key, const std::string& message) {
  throw UsageError(where.str() + ": " + std::string(key) + ": " + message);
}

/// The '}' that closes the "${" whose body starts at `from`: a nested "${" (in a fallback)
/// needs its own '}' first, a "$${" (a literal) does not. npos when there is none.
std::size_t closing_brace(std::string_view text, std::size_t from) {
  int depth = 0;
  for (std::size_t i = from; i < text.size(); ++i) {
    if (text.compare(i, 3, "$${") == 0) {
      i += 2;
    } else if (text.compare(i, 2, "${") == 0) {
      ++depth;
      ++i;
    } else if (text[i] == '}') {
      if (depth == 0) return i;
      --depth;
    }
  }
  return std::string_view::npos;
}

}  // namespace

std::string expand_env(std::string_view text, const Origin& where, std::string_view key) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, 3, "$${") == 0) {
      out += "${";
      i += 3;
      continue;
    }
    if (text.compare(i, 2, "${") != 0) {
      out += text[i++];
      continue;
    }
    const std::size_t close = closing_brace(text, i + 2);
    if (close == std::string_view::npos) fail(where, key, "'${' without a closing '}' (write $${ for a literal ${)");
    const std::string_view body = text.substr(i + 2, close - i - 2);
    const std::size_t sep = body.find(":-");
    const std::string_view name = body.substr(0, sep);
    const bool name_ok = !name.empty() && is_name_start(name[0]) &&
                         std::all_of(name.begin(), name.end(), [](char c) { return is_name_char(c); });
    if (!name_ok) fail(where, key, "'${" + std::string(body) + "}' is not ${NAME} or ${NAME:-default}");
    const char* value = std::getenv(std::string(name).c_str());
    if (sep == std::string_view::npos) {
      if (value == nullptr)
        fail(where, key,
             "environment variable " + std::string(name) + " is not set (write ${" + std::string(name) +
                 ":-default} to give a default)");
      out += value;
    } else if (value != nullptr && *value != '\0') {
      out += value;
    } else {
      out += expand_env(body.substr(sep + 2), where, key);  // a fallback may hold ${...} itself
    }
    i = close + 1;
  }
  return out;
}

void expand_env_tree(ConfigNode& node, const std::string& key) {
  switch (node.kind) {
    case ConfigNode::Kind::scalar:
      if (node.expand_env) node.text = expand_env(node.text, node.origin, key);
      break;
    case ConfigNode::Kind::sequence:
      for (auto& item : node.items) expand_env_tree(item, key);
      break;
    case ConfigNode::Kind::map:
      for (auto& [k, v] : node.entries) expand_env_tree(v, key.empty() ? k : key + "." + k);
      break;
    case ConfigNode::Kind::null: break;
  }
}

}  // namespace k3::config
