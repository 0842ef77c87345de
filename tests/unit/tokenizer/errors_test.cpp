// Bad rank files, bad parameters and bad input: each a clear error naming what and where.
#include <catch2/catch.hpp>

#include "tokenizer_fixture.hpp"

using namespace k3::test;
using Catch::Contains;

namespace {

std::string all_bytes() {
  std::string text;
  for (int b = 0; b < 256; ++b) text += base64(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
  return text;
}

std::string create_error(const k3::PluginParams& params) {
  try {
    make_tokenizer(params);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("errors: missing rank file, or no model parameter") {
  const auto missing = (tokenizer_scratch() / "nope.tiktoken").string();
  const std::string msg = create_error({{"model", missing}});
  CHECK_THAT(msg, Contains(missing) && Contains("not found"));
  CHECK_THAT(create_error({{"pattern", "kimi"}}), Contains("model"));
}

TEST_CASE("errors: corrupt rank file lines are named by file and line") {
  const auto bad_b64 = write_file("bad_b64.tiktoken", "YQ== 0\nYg== 1\n!!!! 2\n");
  CHECK_THAT(create_error({{"model", bad_b64.string()}}), Contains("bad_b64.tiktoken:3") && Contains("base64"));
  const auto one_field = write_file("one_field.tiktoken", "YQ== 0\nYg==\n");
  CHECK_THAT(create_error({{"model", one_field.string()}}), Contains("one_field.tiktoken:2"));
  const auto bad_rank = write_file("bad_rank.tiktoken", "YQ== 0\n\nYg== 1x\n");
  CHECK_THAT(create_error({{"model", bad_rank.string()}}), Contains("bad_rank.tiktoken:3") && Contains("1x"));
  const auto dup_rank = write_file("dup_rank.tiktoken", "YQ== 0\nYg== 1\nYw== 1\n");
  CHECK_THAT(create_error({{"model", dup_rank.string()}}),
             Contains("dup_rank.tiktoken:3") && Contains("rank 1") && Contains("line 2"));
  const auto dup_token = write_file("dup_token.tiktoken", "YQ== 0\nYg== 1\nYQ== 2\n");
  CHECK_THAT(create_error({{"model", dup_token.string()}}), Contains("dup_token.tiktoken:3") && Contains("line 1"));
  const auto huge = write_file("huge_rank.tiktoken", "YQ== 4000000000\n");
  CHECK_THAT(create_error({{"model", huge.string()}}), Contains("huge_rank.tiktoken:1") && Contains("4000000000"));
  // Non-canonical base64 (padding bits set) is refused, not silently decoded.
  const auto noncanon = write_file("noncanon.tiktoken", "YR== 0\n");
  CHECK_THAT(create_error({{"model", noncanon.string()}}), Contains("noncanon.tiktoken:1"));
}

TEST_CASE("errors: unknown parameters are returned, bad values refused") {
  const auto m = write_file("ok.tiktoken", all_bytes());
  std::vector<std::string> unknown;
  auto t = host().create_tokenizer("tiktoken", {{"model", m.string()}, {"colour", "blue"}}, &unknown);
  CHECK(unknown == std::vector<std::string>{"colour"});
  CHECK_THAT(create_error({{"model", m.string()}, {"colour", "blue"}}), Contains("colour"));
  CHECK_THAT(create_error({{"model", m.string()}, {"pattern", "gpt5"}}), Contains("gpt5"));
  CHECK_THAT(create_error({{"model", m.string()}, {"pattern", "regex:(["}}), Contains("compile"));
  CHECK_THAT(create_error({{"model", m.string()}, {"num_reserved_special_tokens", "-3"}}),
             Contains("num_reserved_special_tokens"));
}

TEST_CASE("errors: invalid UTF-8 input names the byte offset") {
  auto t = make_tokenizer({{"model", write_file("u.tiktoken", all_bytes()).string()}, {"pattern", "kimi"}});
  const std::vector<std::pair<std::string, std::size_t>> cases = {
      {"ab\xff"
       "cd",
       2},                                  // never valid
      {"abc\xc3", 3},                       // truncated at the end
      {"\xc0\xaf", 0},                      // overlong '/'
      {"ok \xed\xa0\x80", 3},               // UTF-16 surrogate
      {"\xe4\xb8\xad\xf4\x90\x80\x80", 3},  // above U+10FFFF
      {"x\xe4\xb8z", 1},                    // continuation byte missing
  };
  for (const auto& [text, offset] : cases) {
    std::vector<std::uint32_t> ids{7};
    const auto st = t->encode(text, false, ids);
    INFO("offset " << offset);
    CHECK(st.code == k3::sdk::StatusCode::invalid_argument);
    CHECK_THAT(st.detail, Contains("byte offset " + std::to_string(offset)));
    CHECK(ids == std::vector<std::uint32_t>{7});  // nothing appended on failure
  }
}

TEST_CASE("errors: decoding an id outside the vocabulary") {
  auto t = make_tokenizer({{"model", write_file("d.tiktoken", all_bytes()).string()}, {"pattern", "cl100k"}});
  REQUIRE(t->vocab_size() == 256);
  std::string out = "kept";
  const auto st = t->decode(std::vector<std::uint32_t>{104, 105, 256}, out);
  CHECK(st.code == k3::sdk::StatusCode::invalid_argument);
  CHECK_THAT(st.detail, Contains("256") && Contains("position 2"));
  CHECK(out == "kept");
  CHECK(t->decode(std::vector<std::uint32_t>{0xFFFFFFFFu}, out).code == k3::sdk::StatusCode::invalid_argument);
}

TEST_CASE("errors: a byte without a rank, and a pattern that skips text") {
  // No rank for 0xC3: "é" (C3 A9) cannot be encoded.
  auto t = make_tokenizer({{"model", rank_file("no_c3.tiktoken", {}, 0xC3).string()}, {"pattern", "cl100k"}});
  std::vector<std::uint32_t> ids;
  const auto st = t->encode("caf\xc3\xa9", false, ids);
  CHECK(st.code == k3::sdk::StatusCode::invalid_argument);
  CHECK_THAT(st.detail, Contains("0xC3"));
  auto gaps = make_tokenizer({{"model", write_file("g.tiktoken", all_bytes()).string()}, {"pattern", "regex:[a-z]+"}});
  const auto st2 = gaps->encode("ab cd", false, ids);
  CHECK(st2.code == k3::sdk::StatusCode::invalid_argument);
  CHECK_THAT(st2.detail, Contains("unmatched") && Contains("offset 2"));
}
