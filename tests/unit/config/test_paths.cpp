// Relative paths resolve against the folder of the file that set them.
#include "config_test_util.hpp"

namespace fs = std::filesystem;
using k3test::TempDir;

TEST_CASE("get_path resolves a relative path against the file that set it", "[paths]") {
  TempDir dir;
  dir.write("deep/base/base.yaml",
            "model:\n  path: ../weights\ncache:\n  future: trace.bin\njob:\n  report: /abs/report.json\n");
  const auto top = dir.write("top.yaml",
                             "extends: deep/base/base.yaml\n"
                             "job:\n  prompt_file: prompts/p.txt\n"
                             "plugin_path: [plug, /opt/k3/plugins]\n"
                             "storage:\n  params: {file: !path data/x.bin, plain: data/x.bin}\n");
  const k3::Pipeline p = k3::load_pipeline(top);
  CHECK(p.get_path("model.path") == dir.path() / "deep/weights");
  CHECK(p.get_path("cache.future") == dir.path() / "deep/base/trace.bin");
  CHECK(p.get_path("job.report") == fs::path("/abs/report.json"));
  CHECK(p.get_path("job.prompt_file") == dir.path() / "prompts/p.txt");
  CHECK(p.plugin_path() == std::vector<fs::path>{dir.path() / "plug", "/opt/k3/plugins"});
  // !path marks a plugin parameter as a path; anything else reaches the plugin as written.
  CHECK(p.get_params("storage.params") ==
        k3::PluginParams{{"file", (dir.path() / "data/x.bin").string()}, {"plain", "data/x.bin"}});
  CHECK(p.get_path("job.save_state").empty());  // unset paths stay empty
}

TEST_CASE("defaults and --set paths resolve against the working directory", "[paths]") {
  TempDir dir;
  const auto file = dir.write("sub/p.yaml", "threads: 1\n");
  const k3::Pipeline p = k3::load_pipeline(file, {"trace.out=traces/t.bin"});
  CHECK(p.get_path("trace.out") == fs::current_path() / "traces/t.bin");
  CHECK(p.where("model.path") == "default");
  CHECK(p.get_path("model.path") == fs::current_path() / "models/demo");
}

TEST_CASE("refuse() points a later stage's error at the file that set the value", "[paths][errors]") {
  TempDir dir;
  const std::string text = "storage:\n  plugin: posix\n  params:\n    blok_size: 4096\n";
  const auto file = dir.write("p.yaml", text);
  const k3::Pipeline p = k3::load_pipeline(file, {"model.path=/nowhere"});
  CHECK(k3test::usage_error([&] { p.refuse("storage.params.blok_size", "unknown parameter of storage posix"); }) ==
        k3test::pos(file, text, "4096") + ": storage.params.blok_size: unknown parameter of storage posix");
  CHECK(k3test::usage_error([&] { p.refuse("model.path", "no config.json in /nowhere"); }) ==
        "--set model.path=/nowhere: model.path: no config.json in /nowhere");
}

TEST_CASE("source_file names the file whose value a key holds, empty for --set and defaults", "[paths]") {
  TempDir dir;
  dir.write("base/base.yaml", "job:\n  prompt: from the base\n  max_new_tokens: 3\n");
  const auto top = dir.write("top.yaml", "extends: base/base.yaml\njob:\n  max_new_tokens: 4\n");
  const k3::Pipeline p = k3::load_pipeline(top, {"threads=2"});
  CHECK(p.source_file("job.prompt") == dir.path() / "base/base.yaml");
  CHECK(p.source_file("job.max_new_tokens") == dir.path() / "top.yaml");  // later wins, and says so
  CHECK(p.source_file("threads").empty());
  CHECK(p.source_file("trace.out").empty());
  CHECK(p.source_file("job.prompt").is_absolute());
}
