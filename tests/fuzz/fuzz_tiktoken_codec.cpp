// The tiktoken tokenizer's encode and decode on one fixed tokenizer (the ranks make-model
// writes into a demo checkpoint, the Kimi pattern, tokenizer_config-style specials and 256
// reserved ids). Input: one mode byte, then text (mode bit 1 clear) or little-endian u32
// ids (bit 1 set); bit 0 = parse special tokens. Oracle: valid UTF-8 always encodes, every
// id is inside the vocabulary, and decode(encode(text)) == text; invalid UTF-8 is refused
// (invalid_argument), never encoded; decode of any ids either refuses or gives the
// concatenation of their bytes.
#include <cstring>

#include <k3/make_model.hpp>

#include "fuzz_support.hpp"
#include "tiktoken/utf8.hpp"
#include "tiktoken_build.hpp"

namespace {

k3::tiktoken::TiktokenTokenizer& tokenizer() {
  static const auto tok =
      k3::fuzz::build_tiktoken(k3::make_tiktoken_ranks(2048),
                               R"({"added_tokens_decoder": {"2048": {"content": "[BOS]"}, "2049": {"content": "[EOS]"},
          "2050": {"content": "<|im_end|>"}, "2051": {"content": "<|im_user|>"}}})",
                               "<think>=2100,</think>=2101");
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  auto& tok = tokenizer();
  const bool special = (data[0] & 1) != 0;
  const std::string_view rest = k3::fuzz::as_text(data + 1, size - 1);
  if ((data[0] & 2) != 0) {
    std::vector<std::uint32_t> ids(rest.size() / 4);
    if (!ids.empty()) std::memcpy(ids.data(), rest.data(), ids.size() * 4);
    std::string text = "kept";
    const auto st = tok.decode(ids, text);
    k3::fuzz::check(st.ok() || k3::fuzz::is_refusal(st), "decode failed inside: " + st.detail);
    if (!st.ok()) {
      k3::fuzz::check(text == "kept", "a refused decode changed its output");
      return 0;
    }
    std::string one_by_one = "kept";
    for (auto id : ids) k3::fuzz::check(tok.decode({&id, 1}, one_by_one).ok(), "an id decodes in a list but not alone");
    k3::fuzz::check(text == one_by_one, "decode of a list differs from the concatenation of its ids");
    return 0;
  }
  std::vector<std::uint32_t> ids = {7};
  const auto st = tok.encode(rest, special, ids);
  const bool valid = k3::tiktoken::find_invalid_utf8(rest) == k3::tiktoken::kValidUtf8;
  if (!valid) {
    k3::fuzz::check(st.code == k3::sdk::StatusCode::invalid_argument, "invalid UTF-8 not refused: " + st.detail);
    k3::fuzz::check(ids.size() == 1, "a refused encode changed its output");
    return 0;
  }
  k3::fuzz::check(st.ok(), "valid UTF-8 did not encode: " + st.detail);
  k3::fuzz::check(ids.size() >= 1 && ids[0] == 7, "encode did not append");
  ids.erase(ids.begin());
  for (auto id : ids) k3::fuzz::check(id < tok.vocab_size(), "an id outside the vocabulary");
  std::string text;
  const auto dt = tok.decode(ids, text);
  k3::fuzz::check(dt.ok(), "the ids encode gave do not decode: " + dt.detail);
  k3::fuzz::check(text == rest, "decode(encode(text)) != text");
  return 0;
}
