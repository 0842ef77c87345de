// dump(): every key, and loading the dump (from anywhere) gives the same values.
#include "config_test_util.hpp"

#include <sstream>

namespace fs = std::filesystem;
using k3test::TempDir;

namespace {

/// Every value of `p`, read through the public getters, one line per key.
std::string all_values(const k3::Pipeline& p) {
  std::ostringstream out;
  for (const auto& key : k3::pipeline_keys()) {
    if (key == "extends") continue;
    out << key << " =";
    if (key.find(".params") != std::string::npos || key == "cluster.ranks") {  // free-form maps
      for (const auto& [k, v] : p.get_params(key)) out << " " << k << ":" << v;
    } else if (key == "plugin_path" || key == "job.ids") {
      for (const auto& v : p.get_strings(key)) out << " " << v;
    } else {
      out << " " << p.get_string(key);
    }
    out << "\n";
  }
  return out.str();
}

void check_round_trip(const k3::Pipeline& p, const TempDir& dir) {
  // Somewhere else entirely, so relative paths would resolve differently if any were left.
  const auto copy = dir.write("elsewhere/again/dumped.yaml", p.dump());
  const k3::Pipeline q = k3::load_pipeline(copy);
  CHECK(all_values(q) == all_values(p));
}

}  // namespace

TEST_CASE("dump() round-trips the default pipeline with overrides of every kind", "[dump]") {
  TempDir dir;
  const k3::Pipeline p =
      k3::load_pipeline(k3test::source_dir() / "configs/default.yaml",
                        {"description='Quotes \"and\" colons: here, # not a comment'", "plugin_path=[a/b, /c]",
                         "job.ids=[3, 1, 4]", "storage.params={n: 1, nested: {x: \"true\", y: [1, 2]}, empty: ''}",
                         "memory.expert_cache_gb=fit", "memory.trunk_gb=2.25", "job.prompt=line one\nline two",
                         "threads=7", "job.sampling.top_p=0.1", "cache.future=rel/trace.bin", "job.mode=recompute",
                         "tokenizer.params.n=007"});
  check_round_trip(p, dir);
}

TEST_CASE("dump() writes a literal ${ as $${, so loading the dump does not expand it", "[dump]") {
  TempDir dir;
  // From a file, "$${HOME}" is the literal text "${HOME}"; from --set nothing is expanded.
  const auto file = dir.write("p.yaml", "job:\n  prompt: \"$${HOME} and $$${X}\"\n");
  const k3::Pipeline p =
      k3::load_pipeline(file, std::vector<std::string>{"description=cost ${USD}", "storage.params.key=${K}"});
  REQUIRE(p.get_string("job.prompt") == "${HOME} and $${X}");
  REQUIRE(p.get_string("description") == "cost ${USD}");
  check_round_trip(p, dir);
}

TEST_CASE("dump() round-trips every preset", "[dump][presets]") {
  TempDir dir;
  for (const auto& entry : fs::directory_iterator(k3test::source_dir() / "presets")) {
    INFO(entry.path());
    check_round_trip(k3::load_pipeline(entry.path()), dir);
  }
}

TEST_CASE("dump() lists every schema key with where its value came from", "[dump]") {
  TempDir dir;
  const auto file = dir.write("p.yaml", "threads: 3\n");
  const std::string text = k3::load_pipeline(file, {"job.max_new_tokens=5"}).dump();
  for (const auto& key : k3::pipeline_keys()) {
    if (key == "extends") continue;
    const std::string leaf = key.substr(key.rfind('.') + 1);
    INFO(key);
    CHECK(text.find(leaf + ":") != std::string::npos);
  }
  CHECK(text.find("threads: 3  # " + file.string() + ":1:10") != std::string::npos);
  CHECK(text.find("max_new_tokens: 5  # --set job.max_new_tokens=5") != std::string::npos);
  CHECK(text.find("plugin: posix  # default") != std::string::npos);
}
