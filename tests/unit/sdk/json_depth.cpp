// The one JSON nesting bound (sdk/k3/json_depth.hpp): where the scan says a text gets too
// deep, that brackets inside strings (escaped quotes included) do not count, and that any
// bytes are safe to scan.
#include <string>

#include <catch2/catch.hpp>

#include <k3/json_depth.hpp>

using k3::sdk::json_too_deep;
using k3::sdk::kMaxJsonDepth;

namespace {
std::string nest(std::size_t depth, const std::string& inner = "") {
  std::string s;
  for (std::size_t i = 0; i < depth; ++i) s += i % 2 ? "{\"k\":" : "[";
  s += inner.empty() ? "1" : inner;
  for (std::size_t i = depth; i-- > 0;) s += i % 2 ? "}" : "]";
  return s;
}
}  // namespace

TEST_CASE("json depth: 64 levels pass, the 65th opening bracket is named by its offset", "[sdk][json]") {
  CHECK_FALSE(json_too_deep(nest(kMaxJsonDepth)));
  const std::string deep = nest(kMaxJsonDepth + 1);
  const auto at = json_too_deep(deep);
  REQUIRE(at);
  CHECK((deep[*at] == '[' || deep[*at] == '{'));
  CHECK_FALSE(json_too_deep(deep.substr(0, *at)));
  CHECK(json_too_deep("[[[", 2) == 2u);
  CHECK_FALSE(json_too_deep("[[]][[]]", 2));  // siblings do not add up
  CHECK(k3::sdk::json_depth_message("config.json", 7) == "config.json: JSON nested deeper than 64 levels (at byte 7)");
}

TEST_CASE("json depth: brackets inside strings do not count, escaped quotes stay inside", "[sdk][json]") {
  const std::string in_string = "[\"" + std::string(1000, '[') + "\"]";
  CHECK_FALSE(json_too_deep(in_string));
  const std::string escaped = "[\"a\\\"" + std::string(1000, '{') + "\"]";
  CHECK_FALSE(json_too_deep(escaped));
  const std::string backslash_end = "[\"a\\\\\"," + nest(70) + "]";  // "a\\" ends the string
  CHECK(json_too_deep(backslash_end));
}

TEST_CASE("json depth: any bytes are safe (unterminated strings, stray closers, a lone backslash)", "[sdk][json]") {
  CHECK_FALSE(json_too_deep(""));
  CHECK_FALSE(json_too_deep("]]]]}}}"));
  CHECK_FALSE(json_too_deep("\"\\"));
  CHECK_FALSE(json_too_deep(std::string("[\0[", 3), 2));
  CHECK(json_too_deep(std::string(100000, '[')) == kMaxJsonDepth);
  CHECK(json_too_deep("]]][[[", 2) == 5u);  // closers before any opener do not make room
}
