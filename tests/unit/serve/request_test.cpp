// OpenAI request bodies (serve/request.hpp): what is read, what is refused (status 400 and
// the offending param), the error body's shape, and stop sequences over streamed text.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include <k3/error.hpp>
#include <k3/serve.hpp>

#include "serve/request.hpp"

namespace {

using k3::serve::ApiError;
using k3::serve::parse_chat_request;
using k3::serve::parse_completion_request;

/// The param of the ApiError that parsing `body` throws ("" when it throws none).
std::string refused_param(const std::string& body, bool chat = true) {
  try {
    if (chat)
      (void)parse_chat_request(body, 64);
    else
      (void)parse_completion_request(body, 64);
  } catch (const ApiError& e) {
    CHECK(e.status == 400);
    return e.param.empty() ? "<none>" : e.param;
  }
  return "";
}

}  // namespace

TEST_CASE("a chat request: messages, sampling, stop, stream, tools", "[serve][request]") {
  const auto r = parse_chat_request(R"({"model":"x","messages":[
      {"role":"system","content":"be brief"},
      {"role":"user","content":[{"type":"text","text":"hi "},{"type":"text","text":"there"}]},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},
      {"role":"tool","tool_call_id":"c1","content":"42"}],
    "max_tokens":7,"temperature":0.5,"top_p":0.25,"seed":9,"stop":["END","##"],"stream":true,
    "stream_options":{"include_usage":true},"tools":[{"type":"function","function":{"name":"f"}}],
    "tool_choice":"required","reasoning_effort":"low"})",
                                    64);
  REQUIRE(r.messages.size() == 4);
  CHECK(r.messages[0].role == k3::chat::Role::system);
  CHECK(r.messages[1].content == "hi there");
  REQUIRE(r.messages[2].tool_calls.size() == 1);
  CHECK(r.messages[2].tool_calls[0].name == "f");
  CHECK(r.messages[2].tool_calls[0].arguments == "{\"a\":1}");
  CHECK(r.messages[3].tool_call_id == "c1");
  CHECK(r.gen.max_tokens == 7);
  CHECK(r.gen.sampling.temperature == 0.5);
  CHECK(r.gen.sampling.top_p == 0.25);
  CHECK(r.gen.sampling.seed == 9);
  CHECK(r.gen.stop == std::vector<std::string>{"END", "##"});
  CHECK(r.gen.stream);
  CHECK(r.gen.include_usage);
  CHECK(r.render.tool_choice == k3::chat::ToolChoice::required);
  CHECK(r.render.effort == k3::chat::Effort::low);
  CHECK(r.render.thinking);
  CHECK(nlohmann::json::parse(r.render.tools).size() == 1);
}

TEST_CASE("thinking: the model's default without reasoning_effort, an effort turns it on, none off",
          "[serve][request]") {
  const std::string plain = R"({"messages":[{"role":"user","content":"x"}]})";
  CHECK(parse_chat_request(plain, 8, true).render.thinking);
  CHECK_FALSE(parse_chat_request(plain, 8, false).render.thinking);
  const auto asked =
      parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"reasoning_effort":"low"})", 8, false);
  CHECK(asked.render.thinking);
  CHECK(asked.render.effort == k3::chat::Effort::low);
  CHECK_FALSE(parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"reasoning_effort":"none"})", 8, true)
                  .render.thinking);
}

TEST_CASE("defaults: the server's max_tokens, OpenAI sampling, reasoning_effort none turns thinking off",
          "[serve][request]") {
  const auto r = parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"reasoning_effort":"none"})", 33);
  CHECK(r.gen.max_tokens == 33);
  CHECK(r.gen.sampling.temperature == 1.0);
  CHECK(r.gen.sampling.top_p == 1.0);
  CHECK_FALSE(r.gen.stream);
  CHECK_FALSE(r.render.thinking);
  const auto c = parse_completion_request(R"({"prompt":[1,2,3]})", 64);
  CHECK(c.ids_given);
  CHECK(c.prompt_ids == std::vector<std::uint32_t>{1, 2, 3});
  CHECK(parse_completion_request(R"({"prompt":"abc","max_tokens":5})", 64).prompt == "abc");
}

TEST_CASE("what cannot be honoured is refused naming the parameter", "[serve][request]") {
  const std::string m = R"("messages":[{"role":"user","content":"x"}])";
  CHECK(refused_param("{" + m + R"(,"temperature":3})") == "temperature");
  CHECK(refused_param("{" + m + R"(,"top_p":0})") == "top_p");
  CHECK(refused_param("{" + m + R"(,"max_tokens":0})") == "max_tokens");
  CHECK(refused_param("{" + m + R"(,"n":2})") == "n");
  CHECK(refused_param("{" + m + R"(,"stop":["a","b","c","d","e"]})") == "stop");
  CHECK(refused_param("{" + m + R"(,"presence_penalty":0.5})") == "presence_penalty");
  CHECK(refused_param("{" + m + R"(,"stream_options":{"include_usage":true}})") == "stream_options");
  CHECK(refused_param("{" + m + R"(,"tool_choice":{"type":"function","function":{"name":"f"}}})") == "tool_choice");
  CHECK(refused_param("{" + m + R"(,"reasoning_effort":"medium"})") == "reasoning_effort");
  CHECK(refused_param("{" + m + R"(,"mystery":1})") == "mystery");
  CHECK(refused_param(R"({"messages":[]})") == "messages");
  CHECK(refused_param(R"({"messages":[{"role":"wizard","content":"x"}]})") == "messages[0].role");
  CHECK(refused_param(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})") == "messages[0].content");
  CHECK(refused_param(R"({"prompt":["a","b"]})", false) == "prompt");
  CHECK(refused_param(R"({"prompt":"x","echo":true})", false) == "echo");
  CHECK(refused_param(R"({"messages":[{"role":"user","content":"x"}]})") == "");  // accepted
}

TEST_CASE("malformed JSON and a non-object body are 400 with OpenAI's error object", "[serve][request]") {
  for (const char* body : {"{\"messages\": [", "[1,2]", "", "nul"}) {
    try {
      (void)parse_chat_request(body, 8);
      FAIL("accepted: " << body);
    } catch (const ApiError& e) {
      CHECK(e.status == 400);
      const auto j = nlohmann::json::parse(k3::serve::error_body(e));
      CHECK(j["error"]["type"] == "invalid_request_error");
      CHECK(j["error"]["message"].get<std::string>().size() > 0);
      CHECK(j["error"].contains("param"));
      CHECK(j["error"].contains("code"));
    }
  }
}

TEST_CASE("JSON nested deeper than 64 levels is refused before it is parsed, however deep", "[serve][request]") {
  // 60,000 levels in a tool's parameters once overflowed the serializer's stack.
  const std::string deep(60000, '[');
  const std::string tools = R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":)"
                            R"({"name":"f","parameters":{"x":)" +
                            deep + std::string(60000, ']') + "}}}]}";
  try {
    (void)parse_chat_request(tools, 8);
    FAIL("accepted");
  } catch (const ApiError& e) {
    CHECK(e.status == 400);
    CHECK(e.code == "invalid_json");
    CHECK_THAT(e.what(), Catch::Contains("deeper than 64 levels"));
  }
  CHECK(refused_param(R"({"prompt":"x","user":)" + deep + "}", false) == "<none>");
  // 64 levels in all pass the bound (the key is then refused as unknown, not for its depth).
  CHECK(refused_param(R"({"prompt":"x","deep_key":)" + std::string(63, '[') + std::string(63, ']') + "}", false) ==
        "deep_key");
  // A tool call's arguments are JSON inside a string: bounded the same way, naming where.
  const std::string args =
      R"({"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function",)"
      R"("function":{"name":"f","arguments":"{\"a\":)" +
      std::string(70, '[') + std::string(70, ']') + R"(}"}}]}]})";
  CHECK(refused_param(args) == "messages[0].tool_calls[0].function.arguments");
}

TEST_CASE("max_tokens: 1 to 2^63-1 (then the context room caps it), beyond that the bound is named",
          "[serve][request]") {
  const std::string m = R"({"messages":[{"role":"user","content":"x"}],"max_tokens":)";
  CHECK(parse_chat_request(m + "9223372036854775807}", 8).gen.max_tokens == INT64_MAX);
  for (const char* v : {"9223372036854775808", "18446744073709551615", "0", "-1", "1.5", "1e3", "\"8\""}) {
    try {
      (void)parse_chat_request(m + v + "}", 8);
      FAIL("accepted max_tokens " << v);
    } catch (const ApiError& e) {
      CHECK(e.param == "max_tokens");
      CHECK_THAT(e.what(), Catch::Contains("from 1 to 9223372036854775807"));
    }
  }
}

TEST_CASE("stop sequences: text ends before the first match, a partial match is held back", "[serve][request]") {
  k3::serve::StopMatcher s({"STOP", "xy"});
  std::string out = s.push("hello S");
  CHECK(out == "hello ");  // "S" might start STOP
  out += s.push("T");
  CHECK(out == "hello ");
  out += s.push("ale");  // "STale" is not STOP: released
  CHECK(out == "hello STale");
  out += s.push(" and x");
  out += s.push("yz more");
  CHECK(s.stopped());
  CHECK(out == "hello STale and ");
  CHECK(s.push("after").empty());
  CHECK(s.flush().empty());

  k3::serve::StopMatcher held({"END"});
  CHECK(held.push("abcE") == "abc");
  CHECK(held.flush() == "E");  // generation ended: what was held is text after all
  CHECK_FALSE(held.stopped());

  k3::serve::StopMatcher none({});
  CHECK(none.push("anything") == "anything");
}

TEST_CASE("loopback addresses, and only they, may be served without an API key", "[serve][options]") {
  for (const char* h : {"127.0.0.1", "127.1.2.3", "::1", "[::1]", "::ffff:127.0.0.1", "localhost"})
    CHECK(k3::serve::is_loopback(h));
  for (const char* h :
       {"0.0.0.0", "10.0.0.1", "192.168.1.5", "::", "[::]", "::ffff:10.0.0.1", "example.com", "", "[", "[]"})
    CHECK_FALSE(k3::serve::is_loopback(h));
  k3::serve::ServeOptions o;
  o.host = "0.0.0.0";
  o.port = 0;
  CHECK_THROWS_AS(k3::serve::Server(o), k3::UsageError);
}
