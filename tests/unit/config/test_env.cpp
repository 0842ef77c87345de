// ${VAR} and ${VAR:-default} in file values.
#include "config_test_util.hpp"

using k3test::pos;
using k3test::ScopedEnv;
using k3test::TempDir;
using k3test::usage_error;

TEST_CASE("${VAR} and ${VAR:-default} expand in scalar values of every type", "[env]") {
  TempDir dir;
  const ScopedEnv threads("K3_TEST_THREADS", "6");
  const ScopedEnv name("K3_TEST_NAME", "world");
  const ScopedEnv empty("K3_TEST_EMPTY", "");
  const ScopedEnv unset("K3_TEST_UNSET", nullptr);
  const ScopedEnv models("K3_TEST_MODELS", "/srv/models");
  const auto file = dir.write("p.yaml",
                              "threads: ${K3_TEST_THREADS}\n"
                              "description: hello ${K3_TEST_NAME}, ${K3_TEST_UNSET:-nobody} and ${K3_TEST_EMPTY:-x}!\n"
                              "memory:\n"
                              "  trunk_gb: ${K3_TEST_UNSET:-2.5}\n"
                              "model:\n"
                              "  path: ${K3_TEST_MODELS}/k3\n"
                              "storage:\n"
                              "  params: {who: \"${K3_TEST_NAME}\", list: [\"${K3_TEST_THREADS}\", b]}\n"
                              "job:\n"
                              "  prompt: costs $5 and $${HOME} stays\n"
                              "  ids: [\"${K3_TEST_THREADS}\", 7]\n");
  const k3::Pipeline p = k3::load_pipeline(file);
  CHECK(p.get_int("threads") == 6);
  CHECK(p.get_string("description") == "hello world, nobody and x!");
  CHECK(p.get_double("memory.trunk_gb") == 2.5);
  CHECK(p.get_path("model.path") == std::filesystem::path("/srv/models/k3"));
  CHECK(p.get_params("storage.params") == k3::PluginParams{{"who", "world"}, {"list", "6,b"}});
  CHECK(p.get_string("job.prompt") == "costs $5 and ${HOME} stays");
  CHECK(p.get_ints("job.ids") == std::vector<std::int64_t>{6, 7});
}

TEST_CASE("an unset ${VAR} without a default is an error at file:line:col", "[env][errors]") {
  TempDir dir;
  const ScopedEnv unset("K3_TEST_UNSET", nullptr);
  const std::string text = "threads: 1\nmodel:\n  path: /x/${K3_TEST_UNSET}/y\n";
  const auto file = dir.write("p.yaml", text);
  CHECK(usage_error([&] { (void)k3::load_pipeline(file); }) ==
        pos(file, text, "/x/") +
            ": model.path: environment variable K3_TEST_UNSET is not set (write ${K3_TEST_UNSET:-default} to give a "
            "default)");
}

TEST_CASE("a malformed ${...} is an error at file:line:col", "[env][errors]") {
  TempDir dir;
  const std::string open_text = "description: \"a ${K3_TEST_X\"\n";
  const auto open = dir.write("open.yaml", open_text);
  CHECK(usage_error([&] { (void)k3::load_pipeline(open); }) ==
        pos(open, open_text, "\"a") + ": description: '${' without a closing '}' (write $${ for a literal ${)");
  const std::string bad_text = "job:\n  prompt: ${1BAD}\n";
  const auto bad = dir.write("bad.yaml", bad_text);
  CHECK(usage_error([&] { (void)k3::load_pipeline(bad); }) ==
        pos(bad, bad_text, "${") + ": job.prompt: '${1BAD}' is not ${NAME} or ${NAME:-default}");
}

TEST_CASE("extends may use ${VAR}, the result is relative to the file", "[env][extends]") {
  TempDir dir;
  const ScopedEnv which("K3_TEST_BASE", "base");
  dir.write("bases/base.yaml", "threads: 9\n");
  const auto top = dir.write("top.yaml", "extends: bases/${K3_TEST_BASE}.yaml\n");
  CHECK(k3::load_pipeline(top).get_int("threads") == 9);
}

TEST_CASE("an expanded value is text: it is not parsed as YAML again", "[env]") {
  TempDir dir;
  const ScopedEnv list("K3_TEST_LIST", "[1, 2]");
  const std::string text = "job:\n  ids: ${K3_TEST_LIST}\n  prompt: ${K3_TEST_LIST}\n";
  const auto file = dir.write("p.yaml", text);
  CHECK(usage_error([&] { (void)k3::load_pipeline(file); }) ==
        pos(file, text, "${") + ": job.ids: expected a list (e.g. [a, b]), got '[1, 2]'");
  const k3::Pipeline p = k3::load_pipeline(file, {"job.ids=[]"});
  CHECK(p.get_string("job.prompt") == "[1, 2]");
}

TEST_CASE("a ${VAR:-fallback} fallback may hold ${...} itself, expanded only when it is used", "[env]") {
  TempDir dir;
  const ScopedEnv home("K3_TEST_HOME", "/home/u");
  const ScopedEnv data("K3_TEST_DATA", nullptr);
  const ScopedEnv unset("K3_TEST_UNSET", nullptr);
  // The installed configs/default.yaml's form: the XDG folder, else one under HOME.
  const std::string text =
      "model:\n  path: ${K3_TEST_DATA:-${K3_TEST_HOME}/.local/share}/k3host/models/demo\n"
      "description: \"${K3_TEST_HOME:-${K3_TEST_UNSET}} and ${K3_TEST_UNSET:-x${K3_TEST_UNSET:-y}z}!\"\n";
  const auto file = dir.write("p.yaml", text);
  const k3::Pipeline p = k3::load_pipeline(file);
  CHECK(p.get_path("model.path") == std::filesystem::path("/home/u/.local/share/k3host/models/demo"));
  CHECK(p.get_string("description") == "/home/u and xyz!");  // the unused ${K3_TEST_UNSET} is no error
  {
    const ScopedEnv set_data("K3_TEST_DATA", "/xdg");
    CHECK(k3::load_pipeline(file).get_path("model.path") == std::filesystem::path("/xdg/k3host/models/demo"));
  }
  // A fallback that is used and names an unset variable without a default is the usual error.
  const std::string used_text = "model:\n  path: ${K3_TEST_DATA:-${K3_TEST_UNSET}/x}\n";
  const auto used = dir.write("used.yaml", used_text);
  CHECK(usage_error([&] { (void)k3::load_pipeline(used); }) ==
        pos(used, used_text, "${") +
            ": model.path: environment variable K3_TEST_UNSET is not set (write ${K3_TEST_UNSET:-default} to give a "
            "default)");
}
