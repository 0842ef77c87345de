// Parsing generated ids: the whole completion at once and one token at a time.
#include <catch2/catch.hpp>

#include <k3/error.hpp>

#include "chat_fixture.hpp"

using namespace k3::test;
using k3::chat::CompletionParser;
using k3::chat::Message;
using k3::chat::Role;
using k3::chat::StreamEvent;

namespace {

// A completion as the model writes it after the thinking generation prompt.
Ids thinking_completion(const std::string& reasoning, const std::string& content) {
  Ids ids;
  ids.text(reasoning).close("think").open("response").text(content).close("response").close("message");
  return ids;
}

struct Streamed {
  std::string think, response;
  std::vector<k3::chat::ToolCall> calls;
  int done = 0;
  std::vector<StreamEvent> events;
};

Streamed stream(const std::vector<std::uint32_t>& ids, bool thinking) {
  CompletionParser p(chat_tokens(), thinking);
  Streamed s;
  for (auto id : ids)
    for (auto& e : p.feed(id)) {
      s.events.push_back(e);
      if (e.kind == StreamEvent::Kind::think_text) s.think += e.text;
      if (e.kind == StreamEvent::Kind::response_text) s.response += e.text;
      if (e.kind == StreamEvent::Kind::tool_call) s.calls.push_back(e.call);
      if (e.kind == StreamEvent::Kind::done) ++s.done;
    }
  CHECK(p.done());
  return s;
}

}  // namespace

TEST_CASE("parse: a well-formed completion splits reasoning from content") {
  auto ids = thinking_completion("Think: 2+2 is 4.", "It is 4.").id(kEom).v;
  const auto c = k3::chat::parse_completion(chat_tokens(), ids, true);
  REQUIRE(c.reasoning_content.has_value());
  CHECK(*c.reasoning_content == "Think: 2+2 is 4.");
  CHECK(c.content == "It is 4.");
  CHECK(c.tool_calls.empty());
  CHECK(c.stop_id == kEom);
  // [EOS] ends a turn too (the released model uses it).
  ids.back() = kEos;
  CHECK(k3::chat::parse_completion(chat_tokens(), ids, true).stop_id == kEos);
}

TEST_CASE("parse: thinking off starts inside the response channel") {
  Ids ids;
  ids.text("Hello there.").close("response").close("message").id(kEom);
  const auto c = k3::chat::parse_completion(chat_tokens(), ids.v, false);
  CHECK_FALSE(c.reasoning_content.has_value());
  CHECK(c.content == "Hello there.");
  // The same ids read as a thinking completion have no boundary A.
  CHECK_THROWS_WITH(k3::chat::parse_completion(chat_tokens(), ids.v, true), Catch::Contains("<|close|>think<|sep|>"));
}

TEST_CASE("parse: rendering the parsed message reproduces the generated ids") {
  const std::vector<Message> history{{Role::user, "Capital of France?"}};
  const auto prompt = chat_tokens().encode(k3::chat::render(history));
  const auto generated = thinking_completion("France's capital is Paris.", "Paris.").id(kEom).v;
  const auto msg = k3::chat::to_message(k3::chat::parse_completion(chat_tokens(), generated, true));
  std::vector<Message> next = history;
  next.push_back(msg);
  k3::chat::RenderOptions opt;
  opt.generation_prompt = false;
  auto all = prompt;
  all.insert(all.end(), generated.begin(), generated.end());
  CHECK(chat_tokens().encode(k3::chat::render(next, opt)) == all);
}

TEST_CASE("parse: a missing closure is an error, naming what is missing") {
  Ids ids;
  ids.text("thinking").close("think").open("response").text("cut off");
  CHECK_THROWS_WITH(k3::chat::parse_completion(chat_tokens(), ids.v, true), Catch::Contains("before its closure"));
  // The stop id inside the response channel: the message ended without closing.
  ids.id(kEom);
  CHECK_THROWS_WITH(k3::chat::parse_completion(chat_tokens(), ids.v, true),
                    Catch::Contains("ended before its closure"));
  // Closure without the final stop id.
  auto no_stop = thinking_completion("a", "b").v;
  CHECK_THROWS_AS(k3::chat::parse_completion(chat_tokens(), no_stop, true), k3::RuntimeError);
}

TEST_CASE("parse: anything after the stop id is an error") {
  auto ids = thinking_completion("a", "b").id(kEom).v;
  auto extra = ids;
  extra.push_back(plain_ids("x").at(0));
  CHECK_THROWS_WITH(k3::chat::parse_completion(chat_tokens(), extra, true),
                    Catch::Contains("token " + std::to_string(ids.size())) && Catch::Contains("after the end"));
  extra.back() = kEom;  // a second stop id too
  CHECK_THROWS_AS(k3::chat::parse_completion(chat_tokens(), extra, true), k3::RuntimeError);
  // Two ids where one stop id belongs.
  auto two = thinking_completion("a", "b").v;
  two.push_back(plain_ids("x").at(0));
  CHECK_THROWS_WITH(k3::chat::parse_completion(chat_tokens(), two, true), Catch::Contains("expected <|end_of_msg|>"));
}

TEST_CASE("parse: a control or special token inside a payload is refused") {
  Ids open_in_response;
  open_in_response.text("a").close("think").open("response").text("b").id(kOpenId).text("c");
  CHECK_THROWS_WITH(k3::chat::parse_completion(chat_tokens(), open_in_response.v, true),
                    Catch::Contains("<|open|> inside the response channel"));
  Ids bos_in_think;
  bos_in_think.text("a").id(kBos).text("b");
  CHECK_THROWS_WITH(k3::chat::parse_completion(chat_tokens(), bos_in_think.v, true),
                    Catch::Contains("[BOS] inside the think channel"));
  Ids sep_in_think;
  sep_in_think.text("a").id(kSepId);
  CHECK_THROWS_AS(k3::chat::parse_completion(chat_tokens(), sep_in_think.v, true), k3::RuntimeError);
  // The wrong closing tag at boundary A.
  Ids wrong;
  wrong.text("a").close("response");
  CHECK_THROWS_WITH(k3::chat::parse_completion(chat_tokens(), wrong.v, true),
                    Catch::Contains("expected <|close|>think<|sep|>"));
}

TEST_CASE("parse: streaming deltas add up to the batch parse") {
  const auto ids = thinking_completion("Step one, step two; so 12 × 3 = 36 ✓.", "36 — done 🚀").id(kEom).v;
  const auto batch = k3::chat::parse_completion(chat_tokens(), ids, true);
  const auto s = stream(ids, true);
  CHECK(s.think == *batch.reasoning_content);
  CHECK(s.response == batch.content);
  CHECK(s.done == 1);
  CHECK(s.events.back().kind == StreamEvent::Kind::done);
  // Think deltas all come before response deltas.
  bool seen_response = false;
  for (const auto& e : s.events) {
    if (e.kind == StreamEvent::Kind::response_text) seen_response = true;
    if (e.kind == StreamEvent::Kind::think_text) CHECK_FALSE(seen_response);
  }
  // Feeding after done is an error.
  CompletionParser p(chat_tokens(), true);
  for (auto id : ids) p.feed(id);
  CHECK_THROWS_AS(p.feed(kEom), k3::RuntimeError);
}

TEST_CASE("parse: a UTF-8 character split across tokens is held back until whole") {
  // Single bytes are ranks 0..255 of the synthetic tokenizer: feed "é" and "🚀" byte by byte.
  const std::string e_acute = "\xC3\xA9", rocket = "\xF0\x9F\x9A\x80";
  CompletionParser p(chat_tokens(), false);
  CHECK(p.feed(0xC3).empty());
  auto ev = p.feed(0xA9);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == StreamEvent::Kind::response_text);
  CHECK(ev[0].text == e_acute);
  CHECK(p.channel() == CompletionParser::Channel::response);
  CHECK(p.feed(0xF0).empty());
  CHECK(p.feed(0x9F).empty());
  CHECK(p.feed(0x9A).empty());
  ev = p.feed(0x80);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].text == rocket);
  // ASCII after a lead byte completes nothing; the held bytes go out when the payload ends.
  CHECK(p.feed(0xE2).empty());
  Ids rest;
  rest.close("response").close("message").id(kEom);
  for (auto id : rest.v) p.feed(id);
  CHECK(p.done());
  CHECK(p.result().content == e_acute + rocket + "\xE2");
}

TEST_CASE("parse: tool calls come back as OpenAI calls and re-render to the same ids") {
  k3::chat::RenderOptions opt;
  opt.thinking = false;
  opt.generation_prompt = false;
  Message a{Role::assistant, "Checking."};
  a.tool_calls = {{"", "get_weather", R"({"city": "Paris \"centre\"", "days": 3, "opts": {"a": [1,2]}})"},
                  {"", "clock", ""},
                  {"", "raw", R"({"a": 1)"}};
  const std::vector<Message> history{{Role::user, "Weather?"}};
  auto with_call = history;
  with_call.push_back(a);
  const auto prompt_opt = [] {
    k3::chat::RenderOptions o;
    o.thinking = false;
    return o;
  }();
  const auto prompt = chat_tokens().encode(k3::chat::render(history, prompt_opt));
  const auto full = chat_tokens().encode(k3::chat::render(with_call, opt));
  REQUIRE(std::equal(prompt.begin(), prompt.end(), full.begin()));
  const std::vector<std::uint32_t> generated(full.begin() + static_cast<long>(prompt.size()), full.end());

  const auto c = k3::chat::parse_completion(chat_tokens(), generated, false);
  CHECK(c.content == "Checking.");
  REQUIRE(c.tool_calls.size() == 3);
  CHECK(c.tool_calls[0].name == "get_weather");
  CHECK(c.tool_calls[0].arguments == R"({"city": "Paris \"centre\"", "days": 3, "opts": {"a": [1,2]}})");
  CHECK(c.tool_calls[1].name == "clock");
  CHECK(c.tool_calls[1].arguments == "{}");
  CHECK(c.tool_calls[2].arguments == R"({"a": 1)");
  const auto s = stream(generated, false);
  CHECK(s.calls == c.tool_calls);
  CHECK(s.response == c.content);

  auto again = history;
  again.push_back(k3::chat::to_message(c));
  CHECK(chat_tokens().encode(k3::chat::render(again, opt)) == full);
}

TEST_CASE("parse: malformed tool calls are refused") {
  auto parse = [](const Ids& ids) { return k3::chat::parse_completion(chat_tokens(), ids.v, false); };
  auto head = [] {
    Ids ids;
    ids.text("x").close("response").open("tools");
    return ids;
  };
  Ids wrong_index = head();
  wrong_index.open("call tool=\"f\" index=\"2\"").close("call").close("tools").close("message").id(kEom);
  CHECK_THROWS_WITH(parse(wrong_index), Catch::Contains("index=\"1\""));
  Ids bad_type = head();
  bad_type.open("call tool=\"f\" index=\"1\"").open("argument key=\"n\" type=\"number\"").text("abc").close("argument");
  bad_type.close("call").close("tools").close("message").id(kEom);
  CHECK_THROWS_WITH(parse(bad_type), Catch::Contains("not JSON of type number"));
  Ids unknown_tag = head();
  unknown_tag.open("invoke name=\"f\"");
  CHECK_THROWS_AS(parse(unknown_tag), k3::RuntimeError);
  Ids good = head();
  good.open("call tool=\"a&amp;b\" index=\"1\"").open("argument key=\"n\" type=\"number\"").text("5").close("argument");
  good.close("call").close("tools").close("message").id(kEom);
  const auto c = parse(good);
  REQUIRE(c.tool_calls.size() == 1);
  CHECK(c.tool_calls[0].name == "a&b");
  CHECK(c.tool_calls[0].arguments == R"({"n": 5})");
}

TEST_CASE("parse: closing() ends a completion cut after any of its tokens") {
  // A completion with reasoning, a response and tool calls (arguments and raw JSON), rendered
  // as the model would write it; cut after every prefix, closed, and parsed whole again.
  for (const bool thinking : {true, false}) {
    for (const bool tools : {false, true}) {
      CAPTURE(thinking, tools);
      k3::chat::RenderOptions opt;
      opt.thinking = thinking;
      Message a(Role::assistant, "Checking.");
      a.reasoning_content = "Look it up.";
      if (tools) a.tool_calls = {{"", "get_weather", R"({"city": "Paris", "days": 3})"}, {"", "raw", R"({"a": 1)"}};
      const std::vector<Message> history{{Role::user, "Weather?"}};
      auto with_call = history;
      with_call.push_back(a);
      const auto prompt = chat_tokens().encode(k3::chat::render(history, opt));
      opt.generation_prompt = false;
      const auto full = chat_tokens().encode(k3::chat::render(with_call, opt));
      REQUIRE(std::equal(prompt.begin(), prompt.end(), full.begin()));
      const std::vector<std::uint32_t> generated(full.begin() + static_cast<long>(prompt.size()), full.end());

      // Where the tools element ends: the <|sep|> after the second-to-last <|close|>.
      std::vector<std::size_t> closes;
      for (std::size_t i = 0; i < generated.size(); ++i)
        if (generated[i] == kCloseId) closes.push_back(i);
      REQUIRE(closes.size() >= 2);
      std::size_t tools_end = closes[closes.size() - 2];
      while (generated[tools_end] != kSepId) ++tools_end;
      ++tools_end;
      std::size_t parsed = 0, opens_seen = 0;
      for (std::size_t cut = 0; cut <= generated.size(); ++cut) {
        CAPTURE(cut);
        if (cut > 0 && generated[cut - 1] == kOpenId) ++opens_seen;
        CompletionParser p(chat_tokens(), thinking);
        for (std::size_t i = 0; i < cut; ++i) (void)p.feed(generated[i]);
        const auto closing = chat_tokens().encode(p.closing());
        CHECK(closing.empty() == p.done());
        // Inside the tools element a call cut short may not be a call (a header or a number
        // argument half written): it is closed, but only the text around it must parse.
        if (tools && opens_seen > (thinking ? 2u : 1u) && cut < tools_end) continue;
        std::vector<std::uint32_t> ids(generated.begin(), generated.begin() + static_cast<long>(cut));
        ids.insert(ids.end(), closing.begin(), closing.end());
        const auto before = p.result();
        const auto c = k3::chat::parse_completion(chat_tokens(), ids, thinking);
        // Closing adds structure only: the text and the complete calls stay what they were.
        CHECK(c.content == before.content);
        CHECK(c.reasoning_content == before.reasoning_content);
        CHECK(c.tool_calls.size() >= before.tool_calls.size());
        CHECK(c.stop_id == kEom);
        ++parsed;
      }
      if (!tools) CHECK(parsed == generated.size() + 1);  // every cut
    }
  }
  // After a refused token the parser answers for the tokens before it.
  CompletionParser p(chat_tokens(), true);
  for (auto id : plain_ids("Hmm")) (void)p.feed(id);
  const auto closing = p.closing();
  CHECK_THROWS_AS(p.feed(kBos), k3::RuntimeError);
  CHECK(p.closing() == closing);
}
