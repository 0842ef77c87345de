// Loads the example plugin built out of tree by tests/cmake/sdk_out_of_tree.cmake, from the
// folder that script passes in K3_EXAMPLE_PLUGIN_DIR. Hidden ("[.]"): it only means
// something when that script runs it, so a plain test run does not list it.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <utility>

#include <catch2/catch.hpp>

#include <k3/plugin_host.hpp>

namespace fs = std::filesystem;

namespace {

class OnlyResident final : public k3::sdk::VictimQuery {
 public:
  explicit OnlyResident(std::set<std::uint64_t> keys) : keys_(std::move(keys)) {}
  [[nodiscard]] bool evictable(k3::sdk::ExpertKey key) const noexcept override {
    return keys_.count(key.packed()) != 0;
  }

 private:
  std::set<std::uint64_t> keys_;
};

}  // namespace

TEST_CASE("the out-of-tree example plugin loads and evicts", "[.][out-of-tree]") {
  const char* dir = std::getenv("K3_EXAMPLE_PLUGIN_DIR");
  REQUIRE(dir != nullptr);  // hidden test: run by sdk_out_of_tree.cmake, which sets it
  k3::PluginHost host({fs::path(dir)});
  const k3::PluginInfo& info = host.find(k3::PluginKind::cache, "clock");
  CHECK(fs::equivalent(info.path.parent_path(), fs::path(dir)));
  CHECK(info.version == "1.0.0");

  auto policy = host.create_cache("clock", {});
  REQUIRE(policy->reset(2).ok());
  const k3::sdk::ExpertKey a{3, 1}, b{3, 2}, c{4, 0};
  policy->on_access(a, 0);
  policy->on_insert(a);
  policy->on_access(b, 1);
  policy->on_insert(b);
  policy->on_access(a, 2);  // hit
  policy->on_access(c, 3);  // miss, cache full
  k3::sdk::ExpertKey victim;
  // Both keys referenced: the hand clears a, then b, and takes a (the first it reaches).
  REQUIRE(policy->choose_victim(c, OnlyResident({a.packed(), b.packed()}), victim).ok());
  CHECK(victim == a);
  // With a leased, b is the only choice.
  REQUIRE(policy->choose_victim(c, OnlyResident({b.packed()}), victim).ok());
  CHECK(victim == b);
}
