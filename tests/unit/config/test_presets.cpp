// The shipped files: configs/default.yaml and every preset in presets/.
#include "config_test_util.hpp"

#include <algorithm>
#include <map>

namespace fs = std::filesystem;

namespace {

struct Budget {
  std::string trunk;
  std::string cache;
  bool stream_embedding;
};

// The table in docs/pipelines.md, copied by hand. Ultra's trunk is 1.6 GB so that the full
// K3 plan stays within 3 GB (one ring slot of the 1.27 GB MLA layer; docs/streaming.md).
const std::map<std::string, Budget>& design_table() {
  static const std::map<std::string, Budget> table{
      {"ultra", {"1.6", "0.31", true}},     {"laptop", {"3", "1", false}},    {"desktop", {"16", "10", false}},
      {"workstation", {"60", "30", false}}, {"server", {"110", "13", false}}, {"max", {"110", "109", false}},
      {"auto", {"fit", "fit", false}},
  };
  return table;
}

}  // namespace

TEST_CASE(
    "the default pipeline: the shipped fortune model, posix, nextuse, auto kernels, tiktoken/kimi, a short "
    "greedy job",
    "[presets][defaults]") {
  const fs::path file = k3test::source_dir() / "configs/default.yaml";
  const k3::Pipeline p = k3::load_pipeline(file);
  CHECK(p.get_path("model.path") == (k3test::source_dir() / "data/models/fortune").lexically_normal());
  CHECK(fs::is_regular_file(p.get_path("model.path") / "config.json"));
  CHECK(p.get_string("model.geometry") == "fortune");
  CHECK(p.get_path("model.demo_path") == (k3test::source_dir() / "models/demo").lexically_normal());
  CHECK(p.get_bool("model.generate_if_missing"));
  CHECK(p.get_string("storage.plugin") == "posix");
  CHECK(p.get_string("cache.policy") == "nextuse");
  CHECK(p.get_string("kernels.set") == "auto");
  CHECK(p.get_string("tokenizer.plugin") == "tiktoken");
  CHECK(p.get_params("tokenizer.params") == k3::PluginParams{{"pattern", "kimi"}});
  CHECK(p.get_double("job.sampling.temperature") == 0.0);
  CHECK(p.get_string("job.mode") == "incremental");
  CHECK_FALSE(p.get_string("job.prompt").empty());
  CHECK(p.get_int("job.max_new_tokens") > 0);
  CHECK(p.get_int("job.max_new_tokens") <= 32);
  CHECK(p.files() == std::vector<std::string>{file.string()});
}

TEST_CASE("every preset loads, extends configs/default.yaml and sets the documented budgets", "[presets]") {
  const fs::path dir = k3test::source_dir() / "presets";
  const fs::path default_file = (k3test::source_dir() / "configs/default.yaml").lexically_normal();
  std::size_t seen = 0;
  for (const auto& [name, budget] : design_table()) {
    INFO(name);
    const fs::path file = dir / (name + ".yaml");
    const k3::Pipeline p = k3::load_pipeline(file);
    REQUIRE(p.files().size() == 2);
    CHECK(p.files()[0] == default_file.string());
    CHECK(p.files()[1] == file.string());
    CHECK(p.get_string("memory.trunk_gb") == budget.trunk);
    CHECK(p.get_string("memory.expert_cache_gb") == budget.cache);
    CHECK(p.get_bool("memory.stream_embedding") == budget.stream_embedding);
    CHECK(p.where("memory.trunk_gb").rfind(file.string() + ":", 0) == 0);
    CHECK(p.where("memory.expert_cache_gb").rfind(file.string() + ":", 0) == 0);
    CHECK(p.where("storage.plugin").rfind(default_file.string() + ":", 0) == 0);
    CHECK(p.where("description").rfind(file.string() + ":", 0) == 0);
    CHECK_FALSE(p.get_string("description").empty());
    ++seen;
  }
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) files += entry.path().extension() == ".yaml" ? 1 : 0;
  CHECK(files == seen);  // no preset outside the table, none missing
}

TEST_CASE("list_presets reads the preset files, smallest trunk first and auto last", "[presets]") {
  const auto presets = k3::list_presets(k3test::source_dir() / "presets");
  std::vector<std::string> names;
  for (const auto& p : presets) {
    names.push_back(p.name);
    INFO(p.name);
    CHECK(p.trunk_gb == design_table().at(p.name).trunk);
    CHECK(p.expert_cache_gb == design_table().at(p.name).cache);
    CHECK(p.description == k3::load_pipeline(p.file).get_string("description"));
  }
  CHECK(names == std::vector<std::string>{"ultra", "laptop", "desktop", "workstation", "server", "max", "auto"});
}

TEST_CASE("list_presets refuses a missing folder and a broken preset", "[presets][errors]") {
  k3test::TempDir dir;
  CHECK(k3test::usage_error([&] { (void)k3::list_presets(dir.path() / "none"); }) ==
        "presets folder '" + (dir.path() / "none").string() + "' does not exist");
  const std::string text = "memory:\n  trunk_gb: lots\n";
  const auto bad = dir.write("bad.yaml", text);
  CHECK(k3test::usage_error([&] { (void)k3::list_presets(dir.path()); }) ==
        k3test::pos(bad, text, "lots") + ": memory.trunk_gb: expected a size in GB or 'fit', got 'lots'");
}

TEST_CASE("the test pipelines in configs/test load (except the deliberately broken ones)", "[presets]") {
  for (const auto& entry : fs::directory_iterator(k3test::source_dir() / "configs/test")) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".yaml" || name.rfind("bad-", 0) == 0) continue;
    INFO(name);
    CHECK_NOTHROW(k3::load_pipeline(entry.path()));
  }
}

TEST_CASE("a --config NAME: a preset name resolves in the data folder, anything path-like stays a path",
          "[presets][resolve]") {
  // In a build tree the data folder's presets/ and configs/ are links to the source tree's
  // (build/lib/k3host/data), resolved, so relative paths in them resolve in the source tree.
  const fs::path presets = fs::weakly_canonical(k3test::source_dir() / "presets");
  CHECK(k3::default_presets_dir() == presets);
  CHECK(k3::default_pipeline_file() == fs::weakly_canonical(k3test::source_dir() / "configs/default.yaml"));
  CHECK(k3::resolve_pipeline_file("laptop") == presets / "laptop.yaml");
  CHECK(k3::resolve_pipeline_file("presets/laptop.yaml") == "presets/laptop.yaml");
  CHECK(k3::resolve_pipeline_file("laptop.yaml") == "laptop.yaml");  // a suffix: a path, even if missing
  CHECK(k3::resolve_pipeline_file("laptop.yml") == "laptop.yml");

  const k3::Pipeline p = k3::load_pipeline("laptop", {"job.max_new_tokens=3"});
  CHECK(p.file() == presets / "laptop.yaml");
  CHECK(p.get_path("model.path") == (k3test::source_dir() / "data/models/fortune").lexically_normal());
  CHECK(p.get_int("job.max_new_tokens") == 3);
  CHECK(p.where("memory.trunk_gb").rfind((presets / "laptop.yaml").string() + ":", 0) == 0);
}

TEST_CASE("model.path demo selects the synthetic demo at model.demo_path, with its geometry", "[presets][demo]") {
  const fs::path demo = (k3test::source_dir() / "models/demo").lexically_normal();
  // -m demo on a preset: the folder and geometry of the demo, the origin of the flag.
  const k3::Pipeline p = k3::load_pipeline("laptop", std::vector<k3::Override>{{"model.path=demo", "-m demo"}});
  CHECK(p.get_path("model.path") == demo);
  CHECK(p.get_string("model.geometry") == "demo");
  CHECK(p.where("model.path") == "-m demo");
  CHECK(p.where("model.geometry") == "-m demo");
  // The demo stands in for K3: the preset's budgets are K3's, scaled to it.
  CHECK(p.get_string("memory.budgets_for") == "k3");
  CHECK(p.where("memory.budgets_for") == "-m demo");
  const k3::Pipeline own_bytes =
      k3::load_pipeline("laptop", std::vector<k3::Override>{{"model.path=demo", "-m demo"},
                                                            {"memory.budgets_for=model", "--set"}});
  CHECK(own_bytes.get_string("memory.budgets_for") == "model");
  // A geometry the command line chose stays (a synthetic tiny model at the demo location).
  const k3::Pipeline tiny =
      k3::load_pipeline("laptop", std::vector<std::string>{"model.path=demo", "model.geometry=tiny"});
  CHECK(tiny.get_path("model.path") == demo);
  CHECK(tiny.get_string("model.geometry") == "tiny");
  // ./demo is a folder named demo, not the demo.
  const k3::Pipeline folder = k3::load_pipeline("laptop", std::vector<std::string>{"model.path=./demo"});
  CHECK(folder.get_path("model.path") == (fs::current_path() / "demo").lexically_normal());
  CHECK(folder.get_string("model.geometry") == "fortune");
  CHECK(folder.get_string("memory.budgets_for") == "model");

  // A pipeline without model.path (and without extends) runs the demo: the schema default.
  k3test::TempDir dir;
  const auto bare = dir.write("bare.yaml", "threads: 1\n");
  const k3::Pipeline standalone = k3::load_pipeline(bare);
  CHECK(standalone.get_path("model.path") == (fs::current_path() / "models/demo").lexically_normal());
  CHECK(standalone.get_string("model.geometry") == "demo");
  // A file's own demo_path, relative to that file.
  const auto own = dir.write("own.yaml", "model:\n  path: demo\n  demo_path: synthetic\n");
  CHECK(k3::load_pipeline(own).get_path("model.path") == dir.path() / "synthetic");
}

TEST_CASE("a --config NAME: an existing file of that name wins over the preset", "[presets][resolve]") {
  k3test::TempDir dir;
  dir.write("laptop", "threads: 3\n");
  const fs::path before = fs::current_path();
  fs::current_path(dir.path());
  const fs::path resolved = k3::resolve_pipeline_file("laptop");
  const std::int64_t threads = k3::load_pipeline("laptop").get_int("threads");
  fs::current_path(before);
  CHECK(resolved == "laptop");
  CHECK(threads == 3);
}

TEST_CASE("a --config NAME: an unknown name names both places tried and the presets there, and the closest",
          "[presets][resolve][errors]") {
  const fs::path presets = k3::default_presets_dir();
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(presets))
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  const std::string expected = "pipeline 'lapton' not found (did you mean 'laptop'?): no file ./lapton and no preset " +
                               (presets / "lapton.yaml").string() + " (presets: " + list + ")";
  CHECK(k3test::usage_error([] { (void)k3::resolve_pipeline_file("lapton"); }) == expected);
  CHECK(k3test::usage_error([] { (void)k3::load_pipeline("lapton"); }) == expected);
  // Two letters swapped, and a case slip, are typos too; a name like none is not.
  CHECK_THAT(k3test::usage_error([] { (void)k3::resolve_pipeline_file("lapotp"); }),
             Catch::StartsWith("pipeline 'lapotp' not found (did you mean 'laptop'?): "));
  CHECK_THAT(k3test::usage_error([] { (void)k3::resolve_pipeline_file("Desktop"); }),
             Catch::StartsWith("pipeline 'Desktop' not found (did you mean 'desktop'?): "));
  CHECK_THAT(k3test::usage_error([] { (void)k3::resolve_pipeline_file("quantum"); }),
             Catch::StartsWith("pipeline 'quantum' not found: no file ./quantum and no preset "));
}
