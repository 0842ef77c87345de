// The control tokens come from the tokenizer by their text (the checkpoint's
// tokenizer_config.json), never from a table of ids.
#include <k3/chat.hpp>
#include <k3/error.hpp>

#include "chat/xtml.hpp"

namespace k3::chat {
namespace {

std::optional<std::uint32_t> lookup(sdk::Tokenizer& tok, std::string_view text) {
  std::uint32_t id = 0;
  if (!tok.special_id(text, id).ok()) return std::nullopt;
  return id;
}

std::uint32_t require(sdk::Tokenizer& tok, std::string_view text) {
  if (auto id = lookup(tok, text)) return *id;
  throw UsageError("chat: the tokenizer has no special token " + std::string(text) +
                   " (K3's chat format needs <|open|>, <|close|>, <|sep|>, <|end_of_msg|> in tokenizer_config.json)");
}

}  // namespace

ChatTokens::ChatTokens(sdk::Tokenizer& tokenizer)
    : open(require(tokenizer, detail::kOpen)),
      close(require(tokenizer, detail::kClose)),
      sep(require(tokenizer, detail::kSep)),
      end_of_msg(require(tokenizer, detail::kEndOfMsg)),
      eos(lookup(tokenizer, detail::kEos)),
      tok_(&tokenizer) {}

std::vector<std::uint32_t> ChatTokens::encode(std::span<const Segment> segments) const {
  std::vector<std::uint32_t> ids;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    const Segment& seg = segments[s];
    const std::size_t before = ids.size();
    const sdk::Status st = tok_->encode(seg.text, seg.allow_special, ids);
    if (!st.ok()) throw RuntimeError("chat: encoding segment " + std::to_string(s) + " failed: " + st.detail);
    if (seg.allow_special) {
      std::uint32_t want = 0;
      const bool single = ids.size() == before + 1;
      if (!single || !tok_->special_id(seg.text, want).ok() || ids[before] != want)
        throw RuntimeError("chat: control segment " + std::to_string(s) + " '" + seg.text +
                           "' does not encode to its one special id");
    }
  }
  return ids;
}

std::vector<std::uint32_t> ChatTokens::stop_ids() const {
  std::vector<std::uint32_t> ids{end_of_msg};
  if (eos) ids.push_back(*eos);
  return ids;
}

bool ChatTokens::is_stop(std::uint32_t id) const { return id == end_of_msg || (eos && id == *eos); }

bool ChatTokens::is_special(std::uint32_t id) const {
  std::string text;
  const std::uint32_t one[1] = {id};
  if (!tok_->decode(one, text).ok()) return false;
  std::uint32_t back = 0;
  return tok_->special_id(text, back).ok() && back == id;
}

std::string ChatTokens::decode(std::span<const std::uint32_t> ids) const {
  std::string out;
  const sdk::Status st = tok_->decode(ids, out);
  if (!st.ok()) throw RuntimeError("chat: decoding generated ids failed: " + st.detail);
  return out;
}

}  // namespace k3::chat
