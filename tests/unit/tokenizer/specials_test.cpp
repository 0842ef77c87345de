// Special tokens: from tokenizer_config.json, inline, and Kimi's reserved names; parsed or
// treated as ordinary text.
#include <catch2/catch.hpp>

#include "tokenizer_fixture.hpp"

using namespace k3::test;

namespace {

// 256 bytes + 2 merges: ranks end at 258, so with 4 reserved ids the specials are 258..261.
std::filesystem::path model() { return rank_file("sp.tiktoken", {"hi", "<|"}); }

std::filesystem::path config() {
  return write_file("tokenizer_config.json", R"({
  "added_tokens_decoder": {
    "259": {"content": "<|im_end|>", "lstrip": false, "special": true},
    "261": {"content": "[EOS]", "special": true}
  },
  "model_max_length": 1000
})");
}

}  // namespace

TEST_CASE("specials: config names some reserved ids, the rest get <|reserved_token_{id}|>") {
  auto t = make_tokenizer({{"model", model().string()},
                           {"pattern", "kimi"},
                           {"config", config().string()},
                           {"num_reserved_special_tokens", "4"}});
  CHECK(t->vocab_size() == 262);
  std::uint32_t id = 0;
  REQUIRE(t->special_id("<|im_end|>", id).ok());
  CHECK(id == 259);
  REQUIRE(t->special_id("[EOS]", id).ok());
  CHECK(id == 261);
  REQUIRE(t->special_id("<|reserved_token_258|>", id).ok());
  CHECK(id == 258);
  REQUIRE(t->special_id("<|reserved_token_260|>", id).ok());
  CHECK(id == 260);
  CHECK(t->special_id("<|reserved_token_259|>", id).code == k3::sdk::StatusCode::not_found);
  CHECK(decode(*t, {259, 261}) == "<|im_end|>[EOS]");
}

TEST_CASE("specials: parse_special maps special text to ids, without it the text is ordinary") {
  auto t = make_tokenizer({{"model", model().string()},
                           {"pattern", "kimi"},
                           {"config", config().string()},
                           {"num_reserved_special_tokens", "4"}});
  const std::string text = "hi<|im_end|>hi [EOS]";
  // Parsed: "hi" (256), <|im_end|> (259), then the ordinary text "hi " on its own (pieces
  // "hi" and " "), then [EOS] (261).
  CHECK(encode(*t, text, true) == std::vector<std::uint32_t>{256, 259, 256, byte_id(' '), 261});
  const auto plain = encode(*t, text, false);
  CHECK(std::find(plain.begin(), plain.end(), 259u) == plain.end());
  CHECK(std::find(plain.begin(), plain.end(), 261u) == plain.end());
  CHECK(decode(*t, plain) == text);
  // The "<|" merge (257) shows the special text went through BPE as ordinary text.
  CHECK(std::find(plain.begin(), plain.end(), 257u) != plain.end());
}

TEST_CASE("specials: inline list, longest match wins at one position") {
  auto t = make_tokenizer(
      {{"model", model().string()}, {"pattern", "cl100k"}, {"specials", "<|a|>=300,<|a|>b=301,x=y=302"}});
  CHECK(t->vocab_size() == 303);
  CHECK(encode(*t, "<|a|>b", true) == std::vector<std::uint32_t>{301});
  CHECK(encode(*t, "<|a|>", true) == std::vector<std::uint32_t>{300});
  std::uint32_t id = 0;
  REQUIRE(t->special_id("x=y", id).ok());  // the id follows the last '='
  CHECK(id == 302);
  CHECK(encode(*t, "x=y", true) == std::vector<std::uint32_t>{302});
  // Ids between the ranks and the specials are holes: not decodable.
  std::string out;
  CHECK(t->decode(std::vector<std::uint32_t>{299}, out).code == k3::sdk::StatusCode::invalid_argument);
}

TEST_CASE("specials: cl100k/o200k reserve nothing by default, kimi reserves 256") {
  auto plain = make_tokenizer({{"model", model().string()}, {"pattern", "o200k"}});
  CHECK(plain->vocab_size() == 258);
  auto kimi = make_tokenizer({{"model", model().string()}, {"pattern", "kimi"}});
  CHECK(kimi->vocab_size() == 258 + 256);
  std::uint32_t id = 0;
  REQUIRE(kimi->special_id("<|reserved_token_513|>", id).ok());
  CHECK(id == 513);
}

TEST_CASE("specials: conflicts are refused") {
  const auto m = model().string();
  CHECK_THROWS_WITH(make_tokenizer({{"model", m}, {"specials", "<|x|>=300,<|x|>=301"}}),
                    Catch::Contains("<|x|>") && Catch::Contains("300") && Catch::Contains("301"));
  CHECK_THROWS_WITH(make_tokenizer({{"model", m}, {"specials", "<|x|>=300,<|y|>=300"}}),
                    Catch::Contains("300") && Catch::Contains("<|y|>"));
  CHECK_THROWS_WITH(make_tokenizer({{"model", m}, {"specials", "<|x|>=65"}}),
                    Catch::Contains("65") && Catch::Contains("rank"));
  CHECK_THROWS_WITH(make_tokenizer({{"model", m}, {"specials", "<|x|>=abc"}}), Catch::Contains("abc"));
  const auto bad_json = write_file("bad_config.json", "{\"added_tokens_decoder\": {\"300\": {\"content\": 5}}}");
  CHECK_THROWS_WITH(make_tokenizer({{"model", m}, {"config", bad_json.string()}}),
                    Catch::Contains("bad_config.json") && Catch::Contains("content"));
  const auto not_json = write_file("not_json.json", "{ nope");
  CHECK_THROWS_WITH(make_tokenizer({{"model", m}, {"config", not_json.string()}}),
                    Catch::Contains("not_json.json") && Catch::Contains("JSON"));
}
