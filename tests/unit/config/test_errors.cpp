// Every kind of bad pipeline is a UsageError (exit 2) "file:line:col: key: message", with
// the position computed here from the text itself.
#include "config_test_util.hpp"

using k3test::pos;
using k3test::TempDir;
using k3test::usage_error;

namespace {

/// Writes `text`, loads it, and returns the error message.
std::string error_of(const TempDir& dir, const std::string& text) {
  const auto file = dir.write("bad.yaml", text);
  return usage_error([&] { (void)k3::load_pipeline(file); });
}

std::string at(const TempDir& dir, const std::string& text, const std::string& needle) {
  return pos(dir.path() / "bad.yaml", text, needle);
}

}  // namespace

TEST_CASE("unknown keys point at the key, with a suggestion when one is close", "[errors]") {
  TempDir dir;
  std::string text = "threads: 1\nmemroy:\n  trunk_gb: 2\n";
  CHECK(error_of(dir, text) == at(dir, text, "memroy") + ": memroy: unknown key (did you mean 'memory'?)");
  text = "memory:\n  trunk_gb: 2\n  cache_gb: 1\n";
  CHECK(error_of(dir, text) == at(dir, text, "cache_gb") + ": memory.cache_gb: unknown key");
  text = "job:\n  sampling:\n    temprature: 0.5\n";
  CHECK(error_of(dir, text) == at(dir, text, "temprature") +
                                   ": job.sampling.temprature: unknown key (did you mean 'job.sampling.temperature'?)");
  text = "wholly_unrelated_thing: 1\n";
  CHECK(error_of(dir, text) == at(dir, text, "wholly") + ": wholly_unrelated_thing: unknown key");
}

TEST_CASE("wrong types point at the value", "[errors]") {
  TempDir dir;
  std::string text = "threads: four\n";
  CHECK(error_of(dir, text) == at(dir, text, "four") + ": threads: expected an integer, got 'four'");
  text = "threads: 1.5\n";
  CHECK(error_of(dir, text) == at(dir, text, "1.5") + ": threads: expected an integer, got '1.5'");
  text = "memory:\n  stream_embedding: maybe\n";
  CHECK(error_of(dir, text) ==
        at(dir, text, "maybe") + ": memory.stream_embedding: expected true or false, got 'maybe'");
  text = "memory:\n  trunk_gb: fitt\n";
  CHECK(error_of(dir, text) == at(dir, text, "fitt") + ": memory.trunk_gb: expected a size in GB or 'fit', got 'fitt'");
  text = "job:\n  sampling:\n    temperature: [1]\n";
  CHECK(error_of(dir, text) == at(dir, text, "[1]") + ": job.sampling.temperature: expected a number, got a list");
  text = "description:\n  a: b\n";
  CHECK(error_of(dir, text) == at(dir, text, "a: b") + ": description: expected text, got a map");
  text = "plugin_path: plugins\n";
  CHECK(error_of(dir, text) ==
        at(dir, text, "plugins") + ": plugin_path: expected a list (e.g. [a, b]), got 'plugins'");
  text = "job:\n  ids: [1, two]\n";
  CHECK(error_of(dir, text) == at(dir, text, "two") + ": job.ids: expected an integer, got 'two'");
  text = "storage:\n  plugin: my plugin\n";
  CHECK(error_of(dir, text) ==
        at(dir, text, "my plugin") +
            ": storage.plugin: expected a name (letters, digits, '_', '.', '-'), got 'my plugin'");
  text = "storage:\n  plugin:\n";
  CHECK(error_of(dir, text) == at(dir, text, "plugin") + ": storage.plugin: expected a name, got null");
  text = "threads:\n";
  CHECK(error_of(dir, text) == at(dir, text, "threads") + ": threads: expected an integer, got null");
  text = "memory: 3\n";
  CHECK(error_of(dir, text) == at(dir, text, "3") + ": memory: expected a section (a map of keys), got '3'");
  text = "kernels:\n  params: [a]\n";
  CHECK(error_of(dir, text) ==
        at(dir, text, "[a]") + ": kernels.params: expected a map of plugin parameters, got a list");
  text = "cache:\n  params:\n    deep: [[1]]\n";
  CHECK(error_of(dir, text) ==
        at(dir, text, "[1]]") + ": cache.params.deep: a parameter list holds plain values, got a list");
}

TEST_CASE("out-of-range values point at the value and give the range", "[errors]") {
  TempDir dir;
  std::string text = "threads: -1\n";
  CHECK(error_of(dir, text) == at(dir, text, "-1") + ": threads: must be in 0 – 4096 (got -1)");
  text = "job:\n  sampling:\n    top_p: 0\n";
  CHECK(error_of(dir, text) == at(dir, text, "0\n") + ": job.sampling.top_p: must be in (0, 1] (got 0)");
  text = "job:\n  sampling:\n    top_p: 1.5\n";
  CHECK(error_of(dir, text) == at(dir, text, "1.5") + ": job.sampling.top_p: must be in (0, 1] (got 1.5)");
  text = "job:\n  prefill_chunk: 0\n";
  CHECK(error_of(dir, text) == at(dir, text, "0\n") + ": job.prefill_chunk: must be in 1 – 65536 (got 0)");
  text = "job:\n  sampling:\n    temperature: -0.5\n";
  CHECK(error_of(dir, text) == at(dir, text, "-0.5") + ": job.sampling.temperature: must be in 0 – 100 (got -0.5)");
  text = "memory:\n  trunk_gb: 0\n";
  CHECK(error_of(dir, text) == at(dir, text, "0\n") + ": memory.trunk_gb: must be in (0, 4096] (got 0)");
  text = "job:\n  ids: [5, -2]\n";
  CHECK(error_of(dir, text) == at(dir, text, "-2") + ": job.ids: must be in >= 0 (got -2)");
  text = "job:\n  mode: turbo\n";
  CHECK(error_of(dir, text) ==
        at(dir, text, "turbo") + ": job.mode: must be one of incremental, recompute (got 'turbo')");
  text = "threads: 99999999999999999999\n";
  CHECK(error_of(dir, text) == at(dir, text, "999") + ": threads: expected an integer, got '99999999999999999999'");
  text = "job:\n  sampling:\n    temperature: .nan\n";
  CHECK(error_of(dir, text) == at(dir, text, ".nan") + ": job.sampling.temperature: expected a number, got '.nan'");
}

TEST_CASE("rules joining two keys point at the key that needs the other", "[errors]") {
  TempDir dir;
  const std::string text = "job:\n  mode: recompute\n  load_state: s.bin\n";
  CHECK(error_of(dir, text) == at(dir, text, "s.bin") +
                                   ": job.load_state: needs job.mode incremental (job.mode is 'recompute', set at " +
                                   at(dir, text, "recompute") + ")");
}

TEST_CASE("YAML syntax errors, duplicate keys, tags and a non-map file point at the spot", "[errors]") {
  TempDir dir;
  std::string text = "threads: 1\njob:\n  ids: [1, 2\n  mode: x\n";
  const std::string syntax = error_of(dir, text);
  CHECK(syntax.rfind((dir.path() / "bad.yaml").string() + ":", 0) == 0);
  CHECK(syntax.find(": YAML syntax error: ") != std::string::npos);

  text = "threads: 1\nthreads: 2\n";
  CHECK(error_of(dir, text) == at(dir, text, "threads: 2") + ": duplicate key 'threads' (first set at line 1)");

  text = "- a\n- b\n";
  CHECK(error_of(dir, text) == at(dir, text, "- a") +
                                   ": a pipeline file must be a YAML map of keys (e.g. 'memory:'), "
                                   "not a list");
  text = "threads: 1\n---\nthreads: 2\n";
  CHECK(error_of(dir, text).find(": a pipeline file holds one YAML document, found a second") != std::string::npos);

  text = "threads: !!str 4\n";
  CHECK(error_of(dir, text) == at(dir, text, "!!str") +
                                   ": threads: YAML tag 'tag:yaml.org,2002:str' is not used here (only !path, on "
                                   "plugin params)");
  text = "? [a, b]\n: 1\n";
  CHECK(error_of(dir, text) == at(dir, text, "[a") + ": a key must be a plain name, not a list or map");
}

TEST_CASE("a missing or unreadable pipeline file is a usage error", "[errors]") {
  TempDir dir;
  const auto missing = dir.path() / "missing.yaml";
  CHECK(usage_error([&] { (void)k3::load_pipeline(missing); }) ==
        "pipeline file '" + missing.string() + "' does not exist");
  CHECK(usage_error([&] { (void)k3::load_pipeline(dir.path()); }) ==
        "pipeline file '" + dir.path().string() + "' is a folder, not a YAML file");
}

TEST_CASE("a pipeline file that is not UTF-8 is refused with its line", "[errors]") {
  TempDir dir;
  const auto file = dir.write("latin1.yaml", "threads: 1\n# Memory \xb5 budgets\njob:\n  temperature: 0.5\n");
  CHECK(usage_error([&] { (void)k3::load_pipeline(file); }) ==
        file.string() + ":2: not UTF-8 text; a pipeline file is UTF-8 YAML");
  const auto utf8 = dir.write("utf8.yaml", "threads: 1\n# Memory \xc2\xb5 budgets\n");
  CHECK(k3::load_pipeline(utf8).get_int("threads") == 1);
}

TEST_CASE("an empty file is a pipeline of defaults", "[errors][defaults]") {
  TempDir dir;
  const auto file = dir.write("empty.yaml", "");
  const k3::Pipeline p = k3::load_pipeline(file);
  CHECK(p.get_string("storage.plugin") == "posix");
  CHECK(p.where("storage.plugin") == "default");
  const auto comments = dir.write("comments.yaml", "# nothing but a comment\n");
  CHECK(k3::load_pipeline(comments).get_int("job.max_new_tokens") == 16);
}

TEST_CASE("YAML aliases that expand without end are refused, not followed", "[errors]") {
  TempDir dir;
  std::string text = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  const char* names[] = {"a", "b", "c", "d", "e"};
  for (int level = 1; level < 5; ++level) {
    text += std::string(names[level]) + ": &" + names[level] + " [";
    for (int i = 0; i < 10; ++i) text += std::string(i ? ", " : "") + "*" + names[level - 1];
    text += "]\n";
  }
  const std::string msg = error_of(dir, text);
  CHECK(msg.rfind((dir.path() / "bad.yaml").string() + ":", 0) == 0);
  CHECK(msg.find(": more than 100000 values (aliases expanding without end?)") != std::string::npos);
}
