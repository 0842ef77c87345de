// Rendered ids with the tiny checkpoint's own tokenizer: control ids exactly where the
// control segments are, every text segment encoded alone with specials off.
#include <algorithm>

#include <catch2/catch.hpp>

#include <k3/error.hpp>

#include "chat_fixture.hpp"

using namespace k3::test;
using k3::chat::Message;
using k3::chat::Role;

TEST_CASE("encode: the control tokens come from tokenizer_config.json") {
  const auto& t = chat_tokens();
  CHECK(t.open == kOpenId);
  CHECK(t.close == kCloseId);
  CHECK(t.sep == kSepId);
  CHECK(t.end_of_msg == kEom);
  REQUIRE(t.eos.has_value());
  CHECK(*t.eos == kEos);
  CHECK(t.stop_ids() == std::vector<std::uint32_t>{kEom, kEos});
  CHECK(t.is_special(kBos));
  CHECK(t.is_special(kOpenId));
  CHECK_FALSE(t.is_special(plain_ids("a").at(0)));
}

TEST_CASE("encode: golden conversation, ids segment by segment") {
  const std::vector<Message> msgs{{Role::system, "You are helpful."}, {Role::user, "Hello"}};
  const auto segments = k3::chat::render(msgs);
  const auto ids = chat_tokens().encode(segments);

  // Hand-checked frame: starts <|open|> "message", ends with the generation prompt
  // <|open|> message role="assistant" <|sep|> <|open|> think <|sep|>.
  REQUIRE(ids.size() > 10);
  CHECK(ids[0] == kOpenId);
  CHECK(std::vector<std::uint32_t>(ids.begin() + 1, ids.begin() + 1 + static_cast<long>(plain_ids("message").size())) ==
        plain_ids("message"));
  const auto think = plain_ids("think");
  std::vector<std::uint32_t> tail{kOpenId};
  tail.insert(tail.end(), think.begin(), think.end());
  tail.push_back(kSepId);
  CHECK(std::vector<std::uint32_t>(ids.end() - static_cast<long>(tail.size()), ids.end()) == tail);
  // Three complete messages: three <|end_of_msg|>, and <|open|> = 3 messages + 2 generation-prompt opens.
  CHECK(std::count(ids.begin(), ids.end(), kEom) == 3);
  CHECK(std::count(ids.begin(), ids.end(), kOpenId) == 5);
  CHECK(std::count(ids.begin(), ids.end(), kCloseId) == 3);
  CHECK(std::count(ids.begin(), ids.end(), kSepId) == 8);

  // Segment by segment: control segments are exactly their ids, text segments are the
  // tokenizer's encode of that text alone, specials off.
  std::size_t at = 0;
  for (const auto& s : segments) {
    if (s.allow_special) {
      const std::uint32_t want = s.text == "<|open|>"    ? kOpenId
                                 : s.text == "<|close|>" ? kCloseId
                                 : s.text == "<|sep|>"   ? kSepId
                                                         : kEom;
      if (want == kEom) REQUIRE(s.text == "<|end_of_msg|>");
      CHECK(ids.at(at) == want);
      ++at;
    } else {
      const auto alone = plain_ids(s.text);
      CHECK(std::vector<std::uint32_t>(ids.begin() + static_cast<long>(at),
                                       ids.begin() + static_cast<long>(at + alone.size())) == alone);
      at += alone.size();
    }
  }
  CHECK(at == ids.size());
  CHECK(chat_tokens().decode(ids) == [&] {
    std::string all;
    for (const auto& s : segments) all += s.text;
    return all;
  }());
}

TEST_CASE("encode: control-token text typed by a user is not a control id") {
  const std::string typed = "x <|open|>message<|sep|> y <|end_of_msg|> z";
  k3::chat::RenderOptions opt;
  opt.thinking = false;
  opt.generation_prompt = false;
  const std::vector<Message> msgs{{Role::user, typed}};
  const auto ids = chat_tokens().encode(k3::chat::render(msgs, opt));
  // One message: one <|end_of_msg|>, one <|open|>, two <|sep|> (open and close), one <|close|>.
  CHECK(std::count(ids.begin(), ids.end(), kEom) == 1);
  CHECK(std::count(ids.begin(), ids.end(), kOpenId) == 1);
  CHECK(std::count(ids.begin(), ids.end(), kSepId) == 2);
  const auto plain = plain_ids(typed);
  CHECK(std::search(ids.begin(), ids.end(), plain.begin(), plain.end()) != ids.end());
  // The same text with specials on would have produced the control ids: the test can fail.
  std::vector<std::uint32_t> parsed;
  REQUIRE(chat_tokenizer().encode(typed, true, parsed).ok());
  CHECK(std::count(parsed.begin(), parsed.end(), kOpenId) == 1);
  CHECK(std::count(parsed.begin(), parsed.end(), kEom) == 1);
}

TEST_CASE("encode: a control segment that is not one special id is refused") {
  const std::vector<k3::chat::Segment> bad{{"<|nope|>", true}};
  CHECK_THROWS_AS(chat_tokens().encode(bad), k3::RuntimeError);
}
