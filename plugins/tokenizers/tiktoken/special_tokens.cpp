#include "special_tokens.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include <simdjson.h>

#include <k3/json_depth.hpp>

#include "tokenizer_error.hpp"
#include "utf8.hpp"

namespace k3::tiktoken {

using sdk::StatusCode;

void SpecialTokens::add(std::string text, std::uint32_t id, const std::string& origin) {
  if (text.empty())
    fail(StatusCode::invalid_argument, origin + ": special token " + std::to_string(id) + " has empty text");
  // Valid UTF-8 text can only match at character boundaries of valid UTF-8 input, so the
  // segments between specials stay valid for the pre-tokenizer.
  if (const std::size_t bad = find_invalid_utf8(text); bad != kValidUtf8)
    fail(StatusCode::invalid_argument,
         origin + ": special token " + std::to_string(id) + " is not valid UTF-8 at byte " + std::to_string(bad));
  if (const auto it = by_text_.find(text); it != by_text_.end()) {
    if (it->second == id) return;
    fail(StatusCode::invalid_argument, origin + ": special token '" + text + "' is given ids " +
                                           std::to_string(it->second) + " (" + origin_of_id_[it->second] + ") and " +
                                           std::to_string(id));
  }
  if (const auto it = by_id_.find(id); it != by_id_.end())
    fail(StatusCode::invalid_argument, origin + ": special id " + std::to_string(id) + " is given to both '" +
                                           it->second + "' (" + origin_of_id_[id] + ") and '" + text + "'");
  by_id_.emplace(id, text);
  origin_of_id_.emplace(id, origin);
  by_text_.emplace(std::move(text), id);
}

void SpecialTokens::add_from_config(const std::string& json, const std::string& name) {
  if (const auto deep = sdk::json_too_deep(json))
    fail(StatusCode::invalid_argument, sdk::json_depth_message(name, *deep));
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (const auto err = parser.parse(json).get(root))
    fail(StatusCode::invalid_argument, name + ": not valid JSON: " + simdjson::error_message(err));
  simdjson::dom::object decoder;
  if (root["added_tokens_decoder"].get_object().get(decoder))
    fail(StatusCode::invalid_argument, name + ": no object 'added_tokens_decoder'");
  for (const auto field : decoder) {
    const std::string_view key = field.key;
    std::uint32_t id = 0;
    const auto res = std::from_chars(key.data(), key.data() + key.size(), id);
    if (res.ec != std::errc{} || res.ptr != key.data() + key.size())
      fail(StatusCode::invalid_argument, name + ": added_tokens_decoder key '" + std::string(key) + "' is not an id");
    std::string_view content;
    if (field.value["content"].get_string().get(content))
      fail(StatusCode::invalid_argument,
           name + ": added_tokens_decoder[\"" + std::string(key) + "\"] has no string 'content'");
    add(std::string(content), id, name + " added_tokens_decoder[\"" + std::string(key) + "\"]");
  }
}

void SpecialTokens::add_inline(std::string_view list) {
  std::size_t pos = 0;
  while (pos <= list.size()) {
    std::size_t comma = list.find(',', pos);
    if (comma == std::string_view::npos) comma = list.size();
    const std::string_view item = list.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    const std::size_t eq = item.rfind('=');
    const std::string origin = "specials '" + std::string(item) + "'";
    if (eq == std::string_view::npos) fail(StatusCode::invalid_argument, origin + ": expected text=id");
    const std::string_view num = item.substr(eq + 1);
    std::uint32_t id = 0;
    const auto res = std::from_chars(num.data(), num.data() + num.size(), id);
    if (num.empty() || res.ec != std::errc{} || res.ptr != num.data() + num.size())
      fail(StatusCode::invalid_argument, origin + ": '" + std::string(num) + "' is not an id");
    add(std::string(item.substr(0, eq)), id, origin);
  }
}

void SpecialTokens::add_reserved(std::uint32_t first, std::uint32_t count) {
  for (std::uint32_t id = first; id < first + count; ++id)
    if (by_id_.find(id) == by_id_.end())
      add("<|reserved_token_" + std::to_string(id) + "|>", id, "num_reserved_special_tokens");
}

void SpecialTokens::finish() {
  if (by_text_.empty()) return;
  // Longest first, so that at one position the longest special wins (PCRE2 alternation is
  // leftmost-first). Every byte is written as \x{hh} and the pattern is compiled in byte
  // mode, so no text can be mistaken for regex syntax.
  std::vector<const std::string*> texts;
  for (const auto& [text, id] : by_text_) texts.push_back(&text);
  std::sort(texts.begin(), texts.end(), [](const std::string* a, const std::string* b) {
    return a->size() != b->size() ? a->size() > b->size() : *a < *b;
  });
  std::string source;
  for (const std::string* t : texts) {
    if (!source.empty()) source += '|';
    for (const char c : *t) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x{%02x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
      source += hex;
    }
  }
  matcher_ = std::make_unique<CompiledPattern>(source, false, "special tokens");
}

bool SpecialTokens::find_id(std::string_view text, std::uint32_t& id) const {
  const auto it = by_text_.find(std::string(text));
  if (it == by_text_.end()) return false;
  id = it->second;
  return true;
}

const std::string* SpecialTokens::text_of(std::uint32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

bool SpecialTokens::find_in(std::string_view subject, std::size_t from, MatchScratch& scratch, std::size_t& begin,
                            std::size_t& end, std::uint32_t& id) const {
  if (!matcher_ || !matcher_->find(subject, from, scratch, begin, end)) return false;
  return find_id(subject.substr(begin, end - begin), id);
}

}  // namespace k3::tiktoken
