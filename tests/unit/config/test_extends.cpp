// extends: chains, merge rules (maps merge, scalars and lists replace), cycles.
#include "config_test_util.hpp"

using k3test::pos;
using k3test::TempDir;
using k3test::usage_error;

TEST_CASE("extends follows a chain of relative paths, later keys win, maps merge, lists replace", "[extends]") {
  TempDir dir;
  const std::string base_text =
      "description: base\n"
      "threads: 1\n"
      "plugin_path: [one, two]\n"
      "memory:\n"
      "  trunk_gb: 10\n"
      "  expert_cache_gb: 20\n"
      "storage:\n"
      "  params: {a: 1, b: 2}\n";
  const std::string middle_text =
      "extends: ../base.yaml\n"
      "threads: 2\n"
      "memory:\n"
      "  trunk_gb: 11\n";
  const std::string top_text =
      "extends: mid/middle.yaml\n"
      "description: top\n"
      "plugin_path: [three]\n"
      "storage:\n"
      "  params: {b: 3, c: 4}\n";
  dir.write("base.yaml", base_text);
  const auto middle = dir.write("mid/middle.yaml", middle_text);
  const auto top = dir.write("top.yaml", top_text);

  const k3::Pipeline p = k3::load_pipeline(top);
  CHECK(p.get_string("description") == "top");
  CHECK(p.get_int("threads") == 2);                       // middle over base
  CHECK(p.get_double("memory.trunk_gb") == 11.0);         // middle over base
  CHECK(p.get_double("memory.expert_cache_gb") == 20.0);  // base survives the memory merge
  // Lists replace: only top's entry, resolved against top's folder.
  REQUIRE(p.get_strings("plugin_path").size() == 1);
  CHECK(p.get_strings("plugin_path")[0] == (dir.path() / "three").string());
  // Maps merge: a from base, b and c from top.
  const k3::PluginParams expected{{"a", "1"}, {"b", "3"}, {"c", "4"}};
  CHECK(p.get_params("storage.params") == expected);

  CHECK(p.where("threads") == pos(middle, middle_text, "2\n"));
  CHECK(p.where("memory.expert_cache_gb") == pos(dir.path() / "base.yaml", base_text, "20"));
  CHECK(p.where("description") == pos(top, top_text, "top"));
  CHECK(p.where("storage.params.a") == pos(dir.path() / "base.yaml", base_text, "1, b"));
  CHECK(p.where("storage.params.c") == pos(top, top_text, "4}"));

  const std::vector<std::string> chain{(dir.path() / "base.yaml").string(), (dir.path() / "mid/middle.yaml").string(),
                                       top.string()};
  CHECK(p.files() == chain);
}

TEST_CASE("a scalar can replace a map and a map a scalar, the schema then judges the result", "[extends]") {
  TempDir dir;
  dir.write("base.yaml", "storage:\n  params: {a: 1}\n");
  const std::string top_text = "extends: base.yaml\nstorage:\n  params: 5\n";
  const auto top = dir.write("top.yaml", top_text);
  CHECK(usage_error([&] { (void)k3::load_pipeline(top); }) ==
        pos(top, top_text, "5") + ": storage.params: expected a map of plugin parameters, got '5'");
}

TEST_CASE("a null parameter removes an inherited one, null params clear them all", "[extends]") {
  TempDir dir;
  dir.write("base.yaml", "storage:\n  params: {a: 1, b: 2}\ncache:\n  params: {x: 1}\n");
  const auto top = dir.write("top.yaml", "extends: base.yaml\nstorage:\n  params: {a: ~}\ncache:\n  params:\n");
  const k3::Pipeline p = k3::load_pipeline(top);
  CHECK(p.get_params("storage.params") == k3::PluginParams{{"b", "2"}});
  CHECK(p.get_params("cache.params").empty());
  CHECK_FALSE(p.has("storage.params.a"));
  CHECK(p.has("storage.params.b"));
}

TEST_CASE("an extends cycle is refused, naming every file in it", "[extends][errors]") {
  TempDir dir;
  const auto a = dir.write("a.yaml", "extends: sub/b.yaml\n");
  const std::string b_text = "threads: 1\nextends: ../a.yaml\n";
  dir.write("sub/b.yaml", b_text);
  const std::string b_display = (dir.path() / "sub/b.yaml").string();
  const std::string msg = usage_error([&] { (void)k3::load_pipeline(a); });
  CHECK(msg == pos(b_display, b_text, "../a.yaml") + ": extends: cycle: " + a.string() + " -> " + b_display + " -> " +
                   a.string());
}

TEST_CASE("a file that extends itself is a cycle", "[extends][errors]") {
  TempDir dir;
  const std::string text = "extends: ./self.yaml\n";
  const auto self = dir.write("self.yaml", text);
  CHECK(usage_error([&] { (void)k3::load_pipeline(self); }) ==
        pos(self, text, "./self") + ": extends: cycle: " + self.string() + " -> " + self.string());
}

TEST_CASE("a diamond is not a cycle: two files may extend the same base", "[extends]") {
  TempDir dir;
  dir.write("base.yaml", "threads: 3\n");
  dir.write("left.yaml", "extends: base.yaml\n");
  const auto top = dir.write("top.yaml", "extends: left.yaml\njob:\n  report: r.json\n");
  const k3::Pipeline p = k3::load_pipeline(top);
  CHECK(p.get_int("threads") == 3);
}

TEST_CASE("extends naming a missing file or a bad value is refused at the extends line", "[extends][errors]") {
  TempDir dir;
  const std::string text = "threads: 1\nextends: nowhere.yaml\n";
  const auto top = dir.write("top.yaml", text);
  CHECK(usage_error([&] { (void)k3::load_pipeline(top); }) ==
        pos(top, text, "nowhere") + ": extends: '" + (dir.path() / "nowhere.yaml").string() + "' does not exist");

  const std::string list_text = "extends: [a.yaml, b.yaml]\n";
  const auto listed = dir.write("listed.yaml", list_text);
  CHECK(usage_error([&] { (void)k3::load_pipeline(listed); }) ==
        pos(listed, list_text, "[a") + ": extends: expected the path of one pipeline file, got a list");

  const std::string nested_text = "memory:\n  extends: x.yaml\n";
  const auto nested = dir.write("nested.yaml", nested_text);
  CHECK(usage_error([&] { (void)k3::load_pipeline(nested); }) ==
        pos(nested, nested_text, "extends") + ": memory.extends: unknown key");
}

TEST_CASE("extends is not part of the merged pipeline", "[extends]") {
  TempDir dir;
  dir.write("base.yaml", "threads: 3\n");
  const auto top = dir.write("top.yaml", "extends: base.yaml\n");
  const k3::Pipeline p = k3::load_pipeline(top);
  CHECK_FALSE(p.has("extends"));
  CHECK(p.dump().find("extends:") == std::string::npos);
}
