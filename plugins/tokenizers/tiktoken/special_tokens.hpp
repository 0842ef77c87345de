// Special tokens: text <-> id, from a Hugging Face tokenizer_config.json
// (`added_tokens_decoder`: {"<id>": {"content": "<text>", ...}}), an inline list
// "text=id,text=id", and the Kimi rule that every id in [base, base + reserved) without a
// name is called <|reserved_token_{id}|>.
//
// A text or an id given twice with different partners, an empty text, or an id that is also
// a rank in the rank file is refused. Lookups are read-only and thread-safe after
// construction.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pretokenizer.hpp"

namespace k3::tiktoken {

class SpecialTokens {
 public:
  /// Adds one token; `origin` names where it came from, for errors.
  void add(std::string text, std::uint32_t id, const std::string& origin);
  /// Every entry of added_tokens_decoder in the text of a tokenizer_config.json (`name`,
  /// its URI, prefixes error messages).
  void add_from_config(const std::string& json, const std::string& name);
  /// "text=id,text=id" (the text ends at the last '=' of its item).
  void add_inline(std::string_view list);
  /// Names every id in [first, first + count) that has no token yet <|reserved_token_{id}|>.
  void add_reserved(std::uint32_t first, std::uint32_t count);
  /// Builds the matcher; call once, after the last add.
  void finish();

  [[nodiscard]] bool empty() const noexcept { return by_text_.empty(); }
  [[nodiscard]] const std::unordered_map<std::uint32_t, std::string>& by_id() const noexcept { return by_id_; }
  /// The id of `text`, if it is a special token.
  [[nodiscard]] bool find_id(std::string_view text, std::uint32_t& id) const;
  /// The text of special id `id`, or nullptr.
  [[nodiscard]] const std::string* text_of(std::uint32_t id) const;
  /// The leftmost special token in subject at or after `from` (the longest one if several
  /// start there): false if none.
  bool find_in(std::string_view subject, std::size_t from, MatchScratch& scratch, std::size_t& begin, std::size_t& end,
               std::uint32_t& id) const;

 private:
  std::unordered_map<std::string, std::uint32_t> by_text_;
  std::unordered_map<std::uint32_t, std::string> by_id_;
  std::unordered_map<std::uint32_t, std::string> origin_of_id_;
  std::unique_ptr<CompiledPattern> matcher_;
};

}  // namespace k3::tiktoken
