// The JSON helpers of tool use: arguments split one level deep with their literals kept,
// the way back, and the sorted compact tool declaration.
#include <catch2/catch.hpp>

#include "chat/tool_json.hpp"

using k3::chat::detail::Argument;
using k3::chat::detail::declared_tools;
using k3::chat::detail::join_arguments;
using k3::chat::detail::split_arguments;

TEST_CASE("tool json: arguments keep each non-string value's literal text") {
  const auto a =
      split_arguments(R"( {"s": "x\"y\u00e9", "n" :1e2, "arr":[1, 2 ],"o":{"k":"v"},"b":false,"z":null} trailing)");
  REQUIRE(a.has_value());
  const std::vector<Argument> want{{"s", "string", "x\"yé"},    {"n", "number", "1e2"},
                                   {"arr", "array", "[1, 2 ]"}, {"o", "object", "{\"k\":\"v\"}"},
                                   {"b", "boolean", "false"},   {"z", "null", "null"}};
  CHECK(*a == want);
  CHECK(split_arguments("")->empty());
  CHECK(split_arguments("{}")->empty());
  // Duplicate keys are all kept.
  CHECK(split_arguments(R"({"a":1,"a":2})")->size() == 2);
}

TEST_CASE("tool json: anything but one well-formed object falls back to the raw block") {
  for (const char* bad :
       {"{\"a\": 1", "[1,2]", "   ", "{\"a\" 1}", "{\"a\": 1,}", "{1: 2}", "{\"a\": tru}", "\"s\"", "{\"a\": NaN}"})
    CHECK_FALSE(split_arguments(bad).has_value());
}

TEST_CASE("tool json: joining arguments checks each value against its type") {
  CHECK(join_arguments({{"s", "string", "a\"b"}, {"n", "number", "1e2"}, {"o", "object", "{\"k\": [1]}"}}) ==
        R"({"s": "a\"b", "n": 1e2, "o": {"k": [1]}})");
  CHECK(join_arguments({}) == "{}");
  CHECK_THROWS_AS(join_arguments({{"n", "number", "\"5\""}}), std::invalid_argument);
  CHECK_THROWS_AS(join_arguments({{"b", "boolean", "1"}}), std::invalid_argument);
}

TEST_CASE("tool json: the declaration is sorted at every depth, compact, non-ASCII raw") {
  CHECK(declared_tools(R"([{"type": "function", "function": {"parameters": {"type": "object"}, "name": "zz",
                          "description": "ü"}}])") ==
        R"([{"function":{"description":"ü","name":"zz","parameters":{"type":"object"}},"type":"function"}])");
  CHECK(declared_tools("[]").empty());
  CHECK_THROWS_AS(declared_tools("{}"), std::invalid_argument);
  CHECK_THROWS_AS(declared_tools("[1,"), std::invalid_argument);
}

TEST_CASE("tool json: nothing nested deeper than 64 levels is parsed (chat::render's tools and arguments)") {
  // 60,000 levels overflowed the stack of the serializer that sorts the declaration.
  const std::string deep = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":" +
                           std::string(60000, '[') + std::string(60000, ']') + "}}]";
  CHECK_THROWS_WITH(declared_tools(deep), Catch::Contains("tools: JSON nested deeper than 64 levels"));
  // Arguments too deep to take apart fall back to the raw block, like any other they cannot.
  CHECK_FALSE(split_arguments("{\"a\": " + std::string(70, '[') + std::string(70, ']') + "}"));
  CHECK(split_arguments("{\"a\": " + std::string(60, '[') + std::string(60, ']') + "}"));
}
