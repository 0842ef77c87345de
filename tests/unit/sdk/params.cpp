// The SDK's parameter tables and ParamReader (sdk/k3/params.hpp): what each type accepts, how
// ranges read, what makes a table malformed, and that a factory cannot drift from its table.
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <k3/params.hpp>

using Catch::Matchers::Contains;
using k3::sdk::Param;
using k3::sdk::ParamReader;
namespace param = k3::sdk::param;

namespace {

constexpr k3::sdk::ParamDescriptor kTable[] = {
    param::integer("queue_depth", "32", "[1, 4096]", "io_uring submission queue depth"),
    param::number("ratio", "0.1", "(0, 1]", "a fraction"),
    param::boolean("direct", "false", "open with O_DIRECT"),
    param::choice("advice", "normal", "normal|random", "madvise hint"),
    param::choice("pattern", "kimi", "kimi|regex:*", "pre-tokenizer"),
    param::required(param::path("dir", nullptr, "the tier's folder")),
    param::integer("after", nullptr, "[0, )", "unset = never"),
    param::string("inner", "posix", "the wrapped backend"),
    param::storage_params("inner.*", "the inner backend's parameters"),
};

std::string problem(const k3::sdk::ParamDescriptor& d, const char* value) { return k3::sdk::value_problem(d, value); }

}  // namespace

TEST_CASE("value_problem: integers are exact within their interval", "[sdk][params]") {
  const auto& depth = kTable[0];
  CHECK(problem(depth, "1").empty());
  CHECK(problem(depth, "4096").empty());
  CHECK(problem(depth, "+8").empty());
  CHECK(problem(depth, "0") == "0 is out of range 1–4096");
  CHECK(problem(depth, "4097") == "4097 is out of range 1–4096");
  CHECK(problem(depth, "-1") == "-1 is out of range 1–4096");
  CHECK(problem(depth, "8x") == "expected an integer, got '8x'");
  CHECK(problem(depth, "1.5") == "expected an integer, got '1.5'");
  CHECK(problem(depth, "") == "expected an integer, got ''");
  CHECK(problem(depth, "99999999999999999999999") == "expected an integer, got '99999999999999999999999'");
  const auto big = param::integer("n", nullptr, "[0, )", "m");
  CHECK(problem(big, "18446744073709551615").empty());
  CHECK(problem(big, "-0").empty());  // -0 is 0, inside [0, )
  const auto open = param::integer("n", nullptr, "(-5, 5)", "m");
  CHECK(problem(open, "-4").empty());
  CHECK(problem(open, "-5") == "-5 is out of range (-5, 5)");
  CHECK(problem(open, "5") == "5 is out of range (-5, 5)");
}

TEST_CASE("value_problem: numbers, bools, enums and text", "[sdk][params]") {
  const auto& ratio = kTable[1];
  CHECK(problem(ratio, "1").empty());
  CHECK(problem(ratio, "1e-3").empty());
  CHECK(problem(ratio, "0") == "0 is out of range (0, 1]");
  CHECK(problem(ratio, "nan") == "expected a number, got 'nan'");
  CHECK(problem(ratio, "inf") == "expected a number, got 'inf'");
  CHECK(problem(ratio, "0,5") == "expected a number, got '0,5'");
  for (const char* v : {"true", "false", "yes", "no", "on", "off", "1", "0"}) CHECK(problem(kTable[2], v).empty());
  CHECK(problem(kTable[2], "True") == "expected true or false, got 'True'");
  CHECK(problem(kTable[3], "random").empty());
  CHECK(problem(kTable[3], "rand") == "'rand' is not one of normal, random");
  CHECK(problem(kTable[4], "regex:\\w+").empty());
  CHECK(problem(kTable[4], "regex:") == "'regex:' is not one of kimi, regex:*");
  CHECK(problem(kTable[5], "anything at all").empty());
}

TEST_CASE("allowed_text reads intervals and choices for people", "[sdk][params]") {
  CHECK(k3::sdk::allowed_text(kTable[0]) == "1–4096");
  CHECK(k3::sdk::allowed_text(kTable[1]) == "(0, 1]");
  CHECK(k3::sdk::allowed_text(kTable[3]) == "normal, random");
  CHECK(k3::sdk::allowed_text(kTable[6]) == ">= 0");
  CHECK(k3::sdk::allowed_text(param::number("x", nullptr, "(0, )", "m")) == "> 0");
  CHECK(k3::sdk::allowed_text(param::number("x", nullptr, "(, 3]", "m")) == "<= 3");
  CHECK(k3::sdk::allowed_text(kTable[2]).empty());
}

TEST_CASE("table_problem refuses a table that contradicts itself", "[sdk][params]") {
  CHECK(k3::sdk::table_problem(kTable).empty());
  auto one = [](k3::sdk::ParamDescriptor d) {
    const k3::sdk::ParamDescriptor t[] = {d};
    return k3::sdk::table_problem(t);
  };
  CHECK(one(param::integer("n", "0", "[1, 8]", "m")) == "n: the default 0 is out of range 1–8");
  CHECK(one(param::integer("n", "1", "1..8", "m")) == "n: malformed interval '1..8'");
  CHECK(one(param::integer("n", "1", "[1, 8.5]", "m")) == "n: bound '8.5' is not an integer");
  CHECK(one(param::choice("n", "a", "", "m")) == "n: an enum needs its choices, '|'-separated");
  CHECK(one(param::choice("n", "a", "a||b", "m")) == "n: an enum needs its choices, '|'-separated");
  CHECK(one(param::integer("n", "1", "[1, 8]", "")) == "n: no meaning");
  CHECK(one(param::integer("", "1", "[1, 8]", "m")) == "entry 0: no key");
  CHECK(one(param::required(param::string("n", "x", "m"))) == "n: a required parameter has no default");
  CHECK(one(k3::sdk::ParamDescriptor{"n", 99, nullptr, nullptr, "m", 0}) == "n: unknown type 99");
  CHECK(one(k3::sdk::ParamDescriptor{"n", K3_PARAM_BOOL, "true", "[0, 1]", "m", 0}) ==
        "n: only integers, numbers and enums have allowed values");
  CHECK(one(param::storage_params("inner.*", "m")) ==
        "inner.*: forwards to the storage plugin named by 'inner', which the table does not describe as a string");
  const k3::sdk::ParamDescriptor twice[] = {param::boolean("a", "true", "m"), param::boolean("a", "false", "m")};
  CHECK(k3::sdk::table_problem(twice) == "a: described twice");
}

TEST_CASE("ParamReader checks every value at construction, quoting the description", "[sdk][params]") {
  const std::vector<Param> bad{{"dir", "/t"}, {"queue_depth", "0"}};
  const ParamReader reader(bad, kTable);
  CHECK_FALSE(reader.ok());
  CHECK(reader.status().code == k3::sdk::StatusCode::invalid_argument);
  CHECK(reader.status().detail == "queue_depth: 0 is out of range 1–4096 (io_uring submission queue depth)");

  const std::vector<Param> none, blank{{"dir", ""}};
  const ParamReader missing(none, kTable);
  CHECK(missing.status().detail == "dir: required (the tier's folder)");
  const ParamReader empty(blank, kTable);
  CHECK(empty.status().detail == "dir: required (the tier's folder)");
}

TEST_CASE("ParamReader reads values and the table's defaults, and reports what it did not read", "[sdk][params]") {
  const std::vector<Param> given{{"dir", "/t"},      {"ratio", "0.5"},           {"colour", "blue"},
                                 {"inner", "uring"}, {"inner.queue_depth", "8"}, {"direct", "on"}};
  ParamReader reader(given, kTable);
  REQUIRE(reader.ok());
  CHECK(reader.get_int<int>("queue_depth") == 32);
  CHECK(reader.get_double("ratio") == 0.5);
  CHECK(reader.get_bool("direct"));
  CHECK(reader.get_string("advice") == "normal");
  CHECK(reader.get_string("dir") == "/t");
  CHECK(reader.get_int<std::uint64_t>("after", std::numeric_limits<std::uint64_t>::max()) ==
        std::numeric_limits<std::uint64_t>::max());
  CHECK(reader.get_string("inner") == "uring");
  const auto forwarded = reader.forwarded("inner.");
  REQUIRE(forwarded.size() == 1);
  CHECK(forwarded[0].key == "queue_depth");
  CHECK(forwarded[0].value == "8");
  // Undescribed keys are left for the host to refuse; so is a described key not read.
  CHECK(reader.unused() == std::vector<std::string>{"colour"});
  CHECK(reader.refuse("ratio", "above the other").detail == "ratio: above the other (a fraction)");
}

TEST_CASE("ParamReader makes every drift from the table a logic_error", "[sdk][params]") {
  const std::vector<Param> given{{"dir", "/t"}};
  ParamReader reader(given, kTable);
  CHECK_THROWS_WITH(reader.get_string("colour"), Contains("'colour' is read but not described"));
  CHECK_THROWS_WITH(reader.get_int<int>("ratio"), Contains("described as number but read as another type"));
  CHECK_THROWS_WITH(reader.get_bool("inner.x"), Contains("read but not described"));
  CHECK_THROWS_WITH(reader.get_int<std::int8_t>("queue_depth"), Contains("wider than the integer type"));
  CHECK_THROWS_WITH(reader.get_int<std::uint32_t>("after", 0u), Contains("wider than the integer type"));
  CHECK_THROWS_WITH(reader.get_int<int>("queue_depth", 8), Contains("has a default in the table"));
  CHECK_THROWS_WITH(reader.get_int<std::uint64_t>("after"), Contains("has no default in the table"));
  CHECK_THROWS_WITH(reader.forwarded("outer."), Contains("'outer.*' is not a family"));
  CHECK_THROWS_AS(reader.refuse("colour", "x"), std::logic_error);
}

TEST_CASE("ParamReader converts negative and full-width integers exactly", "[sdk][params]") {
  constexpr k3::sdk::ParamDescriptor table[] = {
      param::integer("offset", "-5", "[-9223372036854775808, 9223372036854775807]", "signed"),
      param::integer("seed", "18446744073709551615", "[0, )", "unsigned"),
  };
  const std::vector<Param> none, lowest{{"offset", "-9223372036854775808"}};
  ParamReader defaults(none, table);
  CHECK(defaults.get_int<std::int64_t>("offset") == -5);
  CHECK(defaults.get_int<std::uint64_t>("seed") == std::numeric_limits<std::uint64_t>::max());
  ParamReader given(lowest, table);
  REQUIRE(given.ok());
  CHECK(given.get_int<std::int64_t>("offset") == std::numeric_limits<std::int64_t>::min());
  CHECK_THROWS_WITH(given.get_int<std::uint64_t>("offset"), Contains("wider than the integer type"));
}
