// --set a.b=c: applied after every file, in order, value parsed as YAML.
#include "config_test_util.hpp"

using k3test::TempDir;
using k3test::usage_error;

TEST_CASE("overrides: --set beats every file, and a later --set beats an earlier one", "[overrides]") {
  TempDir dir;
  dir.write("base.yaml", "threads: 1\nmemory: {trunk_gb: 5}\n");
  const auto top = dir.write("top.yaml", "extends: base.yaml\nthreads: 2\n");
  const k3::Pipeline p =
      k3::load_pipeline(top, {"threads=3", "memory.trunk_gb=7.5", "threads=4", "memory.expert_cache_gb=fit"});
  CHECK(p.get_int("threads") == 4);
  CHECK(p.where("threads") == "--set threads=4");
  CHECK(p.get_double("memory.trunk_gb") == 7.5);
  CHECK(p.where("memory.trunk_gb") == "--set memory.trunk_gb=7.5");
  CHECK_FALSE(p.get_budget("memory.expert_cache_gb").has_value());
  CHECK(p.get_string("memory.expert_cache_gb") == "fit");
}

TEST_CASE("overrides: --set values are YAML: flow lists, flow maps, quoted strings, empty", "[overrides]") {
  TempDir dir;
  const auto file = dir.write("p.yaml", "job:\n  prompt: hello\nstorage:\n  params: {keep: 1}\n");
  const k3::Pipeline p =
      k3::load_pipeline(file, {"job.ids=[1, 2, \"3\"]", "storage.params={depth: 4, list: [x, y]}", "description='a: b'",
                               "job.prompt=", "storage.params.extra=yes", "job.sampling.top_p=0.25"});
  CHECK(p.get_ints("job.ids") == std::vector<std::int64_t>{1, 2, 3});
  CHECK(p.get_strings("job.ids") == std::vector<std::string>{"1", "2", "3"});
  // A --set map merges into the file's map, like one more file would.
  const k3::PluginParams expected{{"keep", "1"}, {"depth", "4"}, {"list", "x,y"}, {"extra", "yes"}};
  CHECK(p.get_params("storage.params") == expected);
  CHECK(p.where("storage.params.extra") == "--set storage.params.extra=yes");
  CHECK(p.get_string("description") == "a: b");
  CHECK(p.get_string("job.prompt").empty());
  CHECK(p.get_double("job.sampling.top_p") == 0.25);
}

TEST_CASE("overrides: --set of an unknown key is refused, naming the --set", "[overrides][errors]") {
  TempDir dir;
  const auto file = dir.write("p.yaml", "threads: 1\n");
  CHECK(usage_error([&] { (void)k3::load_pipeline(file, {"memory.trunkgb=2"}); }) ==
        "--set memory.trunkgb=2: memory.trunkgb: unknown key (did you mean 'memory.trunk_gb'?)");
  CHECK(usage_error([&] { (void)k3::load_pipeline(file, {"a.b=c"}); }) == "--set a.b=c: a.b: unknown key");
  CHECK(usage_error([&] { (void)k3::load_pipeline(file, {"threads"}); }) ==
        "--set threads: expected key=value (e.g. --set memory.expert_cache_gb=2)");
  CHECK(usage_error([&] { (void)k3::load_pipeline(file, {"=3"}); }) ==
        "--set =3: expected key=value (e.g. --set memory.expert_cache_gb=2)");
  CHECK(usage_error([&] { (void)k3::load_pipeline(file, {"memory..trunk_gb=1"}); }) ==
        "--set memory..trunk_gb=1: memory..trunk_gb: not a dotted key like memory.trunk_gb");
  CHECK(usage_error([&] { (void)k3::load_pipeline(file, {"extends=x.yaml"}); }) ==
        "--set extends=x.yaml: extends: extends can only be written in a pipeline file");
}

TEST_CASE("overrides: a --set that is not UTF-8 is refused without echoing its bytes", "[overrides][errors]") {
  // YAML is Unicode text: such a value would be accepted but not survive dump() and reload.
  TempDir dir;
  const auto file = dir.write("p.yaml", "threads: 1\n");
  CHECK(usage_error([&] { (void)k3::load_pipeline(file, {"storage.params.block_size=40\xff\xff"}); }) ==
        "--set: the value is not UTF-8 text");
  CHECK(usage_error([&] { (void)k3::load_pipeline(file, {"job.prompt=caf\xc3"}); }) ==
        "--set: the value is not UTF-8 text");
  CHECK(k3::load_pipeline(file, {"job.prompt=caf\xc3\xa9"}).get_string("job.prompt") == "caf\xc3\xa9");
}

TEST_CASE("overrides: --set values are checked like file values, and errors name the --set", "[overrides][errors]") {
  TempDir dir;
  const auto file = dir.write("p.yaml", "threads: 1\n");
  CHECK(usage_error([&] { (void)k3::load_pipeline(file, {"threads=many"}); }) ==
        "--set threads=many: threads: expected an integer, got 'many'");
  CHECK(usage_error([&] { (void)k3::load_pipeline(file, {"job.mode=fast"}); }) ==
        "--set job.mode=fast: job.mode: must be one of incremental, recompute (got 'fast')");
  CHECK(usage_error([&] { (void)k3::load_pipeline(file, {"memory={trunk_gb: 1, bogus: 2}"}); }) ==
        "--set memory={trunk_gb: 1, bogus: 2}: memory.bogus: unknown key");
  CHECK(usage_error([&] { (void)k3::load_pipeline(file, {"memory=5"}); }) ==
        "--set memory=5: memory: expected a section (a map of keys), got '5'");
  const std::string bad_yaml = usage_error([&] { (void)k3::load_pipeline(file, {"job.ids=[1, 2"}); });
  CHECK(bad_yaml.rfind("--set job.ids=[1, 2: the value is not valid YAML: ", 0) == 0);
}

TEST_CASE("overrides: --set values are not ${VAR}-expanded (the shell already did that)", "[overrides][env]") {
  TempDir dir;
  const auto file = dir.write("p.yaml", "threads: 1\n");
  const k3::Pipeline p = k3::load_pipeline(file, {"job.prompt=costs ${NOT_A_VAR_K3}"});
  CHECK(p.get_string("job.prompt") == "costs ${NOT_A_VAR_K3}");
}

TEST_CASE("a --set replaces a value whose ${VAR} could not be expanded", "[overrides][env]") {
  TempDir dir;
  k3test::ScopedEnv unset("K3_TEST_SURELY_UNSET", nullptr);
  const auto file = dir.write("p.yaml", "job:\n  prompt: ${K3_TEST_SURELY_UNSET}\n");
  const k3::Pipeline p = k3::load_pipeline(file, {"job.prompt=hi"});
  CHECK(p.get_string("job.prompt") == "hi");
}
