// The scalar set as the host loads it: found on the search path, runnable everywhere,
// refusing parameters it does not know.
#include <catch2/catch.hpp>

#include <k3/error.hpp>

#include "kernel_sets.hpp"

TEST_CASE("scalar kernel set is found by the plugin host with score 1", "[kernels][scalar]") {
  const k3::PluginInfo& info = k3test::plugin_host().find(k3::PluginKind::kernels, "scalar");
  CHECK(info.score == 1);
  CHECK(info.path.filename() == "k3-kernels-scalar.so");
  const auto set = k3test::scalar_kernels();
  REQUIRE(set);
  CHECK(set->name() == "scalar");
}

TEST_CASE("scalar kernel set reports unknown parameters", "[kernels][scalar]") {
  std::vector<std::string> unknown;
  const auto set = k3test::plugin_host().create_kernels("scalar", {{"threads", "4"}}, &unknown);
  REQUIRE(set);
  REQUIRE(unknown == std::vector<std::string>{"threads"});
  CHECK_THROWS_AS(k3test::plugin_host().create_kernels("scalar", {{"threads", "4"}}), k3::UsageError);
}

TEST_CASE("every runnable kernel set is listed for the contract tests", "[kernels]") {
  const auto sets = k3test::runnable_kernel_sets();
  REQUIRE_FALSE(sets.empty());
  CHECK(sets.front().name == "scalar");
  for (const auto& s : sets) {
    INFO("set " << s.name);
    CHECK(s.set->name() == s.name);
  }
}
