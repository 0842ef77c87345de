// The plugin host refuses every broken library with one line that names the file and the
// reason. Each fixture (tests/fixtures/plugins) breaks exactly one rule.
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <k3/abi.hpp>
#include <k3/error.hpp>
#include <k3/plugin_host.hpp>

#include "fixture_env.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using k3::PluginHost;
using k3::PluginKind;
using k3::test::fixture_dir;
using k3::test::fixture_file;

namespace {

/// The refusals of libraries in `dir` (the real plugin folder is always on the path too,
/// and its state is not this test's business).
std::vector<k3::PluginProblem> problems_in(const PluginHost& host, const fs::path& dir) {
  std::vector<k3::PluginProblem> out;
  for (const auto& p : host.problems())
    if (p.path.parent_path() == dir) out.push_back(p);
  return out;
}

bool lists(const PluginHost& host, PluginKind kind, const std::string& name) {
  const auto& all = host.plugins();
  return std::any_of(all.begin(), all.end(), [&](const k3::PluginInfo& i) { return i.kind == kind && i.name == name; });
}

/// Runs `find` and returns the UsageError's message (fails the test if it does not throw one).
std::string find_error(const PluginHost& host, PluginKind kind, const std::string& name) {
  try {
    (void)host.find(kind, name);
  } catch (const k3::UsageError& e) {
    CHECK(e.code() == k3::ExitCode::usage);
    return e.what();
  }
  FAIL("find(" << k3::to_string(kind) << ", " << name << ") did not throw a UsageError");
  return {};
}

/// Checks the one refusal of `file` and returns its reason.
std::string single_refusal(const PluginHost& host, const fs::path& file) {
  REQUIRE(fs::exists(file));
  const auto problems = problems_in(host, file.parent_path());
  REQUIRE(problems.size() == 1);
  CHECK(problems.front().path == file);
  CHECK(problems.front().reason.find('\n') == std::string::npos);
  return problems.front().reason;
}

void check_one_line_naming(const std::string& message, const fs::path& file) {
  CHECK_THAT(message, Contains(file.string()));
  CHECK(message.find('\n') == std::string::npos);
}

}  // namespace

TEST_CASE("a library built for another ABI number is refused with both numbers", "[plugin_host]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  PluginHost host({fixture_dir("abi")});
  const fs::path file = fixture_file("abi", "cache", "fxabi");
  const std::string plugin_abi = std::to_string(K3_PLUGIN_ABI + 1);
  const std::string host_abi = std::to_string(K3_PLUGIN_ABI);

  const std::string reason = single_refusal(host, file);
  CHECK_THAT(reason, Contains("ABI"));
  CHECK_THAT(reason, Contains("plugin: " + plugin_abi));
  CHECK_THAT(reason, Contains("host: " + host_abi));
  CHECK_FALSE(lists(host, PluginKind::cache, "fxabi"));

  const std::string error = find_error(host, PluginKind::cache, "fxabi");
  check_one_line_naming(error, file);
  CHECK_THAT(error, Contains("plugin: " + plugin_abi));
  CHECK_THAT(error, Contains("host: " + host_abi));
}

TEST_CASE("a library built with another toolchain is refused naming both toolchains", "[plugin_host]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  PluginHost host({fixture_dir("toolchain")});
  const fs::path file = fixture_file("toolchain", "cache", "fxtoolchain");

  const std::string reason = single_refusal(host, file);
  CHECK_THAT(reason, Contains("toolchain"));
  CHECK_THAT(reason, Contains("fictional-cc/fictional-stdlib"));
  CHECK_THAT(reason, Contains(K3_TOOLCHAIN));

  const std::string error = find_error(host, PluginKind::cache, "fxtoolchain");
  check_one_line_naming(error, file);
  CHECK_THAT(error, Contains("fictional-cc/fictional-stdlib"));
}

TEST_CASE("a library in a storage file name that declares a cache policy is refused", "[plugin_host]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  PluginHost host({fixture_dir("wrongkind")});
  const fs::path file = fixture_file("wrongkind", "storage", "fxkind");

  const std::string reason = single_refusal(host, file);
  CHECK_THAT(reason, Contains("declares kind 'cache'"));
  CHECK_THAT(reason, Contains("k3-cache-fxkind.so"));
  CHECK_FALSE(lists(host, PluginKind::storage, "fxkind"));
  CHECK_FALSE(lists(host, PluginKind::cache, "fxkind"));

  const std::string error = find_error(host, PluginKind::storage, "fxkind");
  check_one_line_naming(error, file);
  CHECK_THAT(error, Contains("declares kind 'cache'"));
}

TEST_CASE("a library without the descriptor symbol is refused", "[plugin_host]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  PluginHost host({fixture_dir("nodesc")});
  const fs::path file = fixture_file("nodesc", "cache", "fxnodesc");

  CHECK_THAT(single_refusal(host, file), Contains("no k3_plugin_descriptor"));
  const std::string error = find_error(host, PluginKind::cache, "fxnodesc");
  check_one_line_naming(error, file);
  CHECK_THAT(error, Contains("no k3_plugin_descriptor"));
}

TEST_CASE("a library with a descriptor but no factory is refused", "[plugin_host]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  PluginHost host({fixture_dir("nofactory")});
  const fs::path file = fixture_file("nofactory", "cache", "fxnofactory");

  CHECK_THAT(single_refusal(host, file), Contains("no k3_plugin_create"));
  const std::string error = find_error(host, PluginKind::cache, "fxnofactory");
  check_one_line_naming(error, file);
  CHECK_THAT(error, Contains("no k3_plugin_create"));
}

TEST_CASE("a file with a plugin's name that is not a shared library is refused", "[plugin_host]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  PluginHost host({fixture_dir("corrupt")});
  const fs::path file = fixture_file("corrupt", "cache", "fxcorrupt");

  CHECK_THAT(single_refusal(host, file), Contains("cannot be loaded"));
  check_one_line_naming(find_error(host, PluginKind::cache, "fxcorrupt"), file);
}

TEST_CASE("the same plugin name in two folders is refused naming both files", "[plugin_host]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  PluginHost host({fixture_dir("dup_a"), fixture_dir("dup_b")});
  const fs::path first = fixture_file("dup_a", "cache", "fxdup");
  const fs::path second = fixture_file("dup_b", "cache", "fxdup");
  REQUIRE(fs::exists(first));

  // The second one found is listed as refused, pointing at the first.
  CHECK_THAT(single_refusal(host, second), Contains(first.string()));
  CHECK(problems_in(host, fixture_dir("dup_a")).empty());

  const std::string error = find_error(host, PluginKind::cache, "fxdup");
  CHECK_THAT(error, Contains(first.string()));
  CHECK_THAT(error, Contains(second.string()));
  CHECK_THAT(error, Contains("more than one"));
  CHECK(error.find('\n') == std::string::npos);
  CHECK_THROWS_AS(host.create_cache("fxdup", {}), k3::UsageError);
}

TEST_CASE("a kernel set with score 0 is listed but cannot be chosen", "[plugin_host]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  PluginHost host({fixture_dir("score0")});
  const fs::path file = fixture_file("score0", "kernels", "fxzero");
  REQUIRE(fs::exists(file));
  CHECK(problems_in(host, fixture_dir("score0")).empty());

  const auto& all = host.plugins();
  const auto it = std::find_if(all.begin(), all.end(), [](const k3::PluginInfo& i) { return i.name == "fxzero"; });
  REQUIRE(it != all.end());
  CHECK(it->kind == PluginKind::kernels);
  CHECK(it->score == 0);

  const std::string error = find_error(host, PluginKind::kernels, "fxzero");
  check_one_line_naming(error, file);
  CHECK_THAT(error, Contains("cannot run on this CPU"));
  CHECK_THROWS_AS(host.create_kernels("fxzero", {}), k3::UsageError);
  // Automatic choice never picks it (it may find a real kernel set in the build tree).
  try {
    const std::string best = host.best_kernels().name;  // outside CHECK, which would catch the throw itself
    CHECK(best != "fxzero");
  } catch (const k3::UsageError& e) {
    CHECK_THAT(std::string(e.what()), Contains("no kernel set"));
  }
}

TEST_CASE("an exception thrown by a factory becomes an error naming the file", "[plugin_host]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  PluginHost host({fixture_dir("throws")});
  const fs::path file = fixture_file("throws", "cache", "fxthrows");
  REQUIRE(fs::exists(file));
  CHECK(lists(host, PluginKind::cache, "fxthrows"));
  try {
    (void)host.create_cache("fxthrows", {});
    FAIL("create_cache did not throw");
  } catch (const k3::Error& e) {
    const std::string msg = e.what();
    check_one_line_naming(msg, file);
    CHECK_THAT(msg, Contains("out of widgets"));
    CHECK_THAT(msg, Contains("internal"));
    CHECK(e.code() == k3::ExitCode::runtime);
  }
}

TEST_CASE("parameters a plugin does not know are an error unless the caller collects them", "[plugin_host]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  PluginHost host({fixture_dir("unknown")});
  const fs::path file = fixture_file("unknown", "cache", "fxunknown");
  REQUIRE(fs::exists(file));
  const k3::PluginParams params{{"capacity_hint", "4"}, {"colour", "blue"}, {"flavour", "salt"}};

  try {
    (void)host.create_cache("fxunknown", params);
    FAIL("create_cache did not throw");
  } catch (const k3::UsageError& e) {
    const std::string msg = e.what();
    check_one_line_naming(msg, file);
    CHECK_THAT(msg, Contains("'colour'"));
    CHECK_THAT(msg, Contains("'flavour'"));
    CHECK(msg.find("capacity_hint") == std::string::npos);
  }

  std::vector<std::string> unknown;
  const auto policy = host.create_cache("fxunknown", params, &unknown);
  CHECK(policy != nullptr);
  CHECK(unknown == std::vector<std::string>{"colour", "flavour"});

  // A malformed value is the plugin's invalid_argument: a usage error naming the key.
  try {
    (void)host.create_cache("fxunknown", {{"capacity_hint", "many"}});
    FAIL("create_cache did not throw");
  } catch (const k3::UsageError& e) {
    check_one_line_naming(e.what(), file);
    CHECK_THAT(std::string(e.what()), Contains("capacity_hint"));
  }
}

TEST_CASE("a library whose parameter table contradicts itself is refused when it is read", "[plugin_host]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  PluginHost host({fixture_dir("badtable")});
  const fs::path file = fixture_file("badtable", "cache", "fxbadtable");
  const std::string reason = single_refusal(host, file);
  CHECK_THAT(reason, Contains("malformed parameter table: depth: the default 0 is out of range 1–8"));
  CHECK_FALSE(lists(host, PluginKind::cache, "fxbadtable"));
  check_one_line_naming(find_error(host, PluginKind::cache, "fxbadtable"), file);
}

TEST_CASE("a plugin without a parameter table is listed as not describing them, its factory decides", "[plugin_host]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  PluginHost host({fixture_dir("unknown"), fixture_dir("good")});
  const k3::PluginInfo& silent = host.find(PluginKind::cache, "fxunknown");
  CHECK_FALSE(silent.describes_params);
  CHECK(k3::check_params(silent, {{"colour", "blue"}}).empty());
  CHECK_THAT(k3::plugin_params_text(silent), Contains("does not describe its parameters"));
  const k3::PluginInfo& described = host.find(PluginKind::storage, "fxmem");
  CHECK(described.describes_params);
  REQUIRE(described.params.size() == 1);
  CHECK(std::string(described.params[0].key) == "size");
}

TEST_CASE("a plugin that is nowhere on the path is an error listing the searched folders", "[plugin_host]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  PluginHost host({fixture_dir("good")});
  const std::string error = find_error(host, PluginKind::cache, "fxnothere");
  CHECK_THAT(error, Contains("cache plugin 'fxnothere' not found"));
  CHECK_THAT(error, Contains(fixture_dir("good").string()));
  // Asking for a name under the wrong kind says which kind it is.
  const std::string wrong_kind = find_error(host, PluginKind::storage, "fxgood");
  CHECK_THAT(wrong_kind, Contains("is a cache plugin"));
  // Names are exact; the suggestion ignores case.
  CHECK_THAT(find_error(host, PluginKind::cache, "FXGOOD"), Contains("not found (did you mean 'fxgood'?)"));
  CHECK_THAT(find_error(host, PluginKind::cache, "fxgod"), Contains("(did you mean 'fxgood'?)"));
  CHECK(find_error(host, PluginKind::cache, "zzzzzz").find("did you mean") == std::string::npos);
}

TEST_CASE("a well-formed plugin is listed with its descriptor", "[plugin_host]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  PluginHost host({fixture_dir("good")});
  CHECK(problems_in(host, fixture_dir("good")).empty());
  const k3::PluginInfo& info = host.find(PluginKind::cache, "fxgood");
  CHECK(info.path == fixture_file("good", "cache", "fxgood"));
  CHECK(info.version == "0.1-fixture");
  CHECK(info.abi == K3_PLUGIN_ABI);
  CHECK(info.score == 1);
}

namespace {

/// The names the lazy fixtures wrote to `mark` when their libraries were loaded.
std::string loaded_names(const fs::path& mark) {
  std::ifstream in(mark);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("only the libraries a run asks for are opened, and the listing opens them all", "[plugin_host]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  const fs::path mark = fixture_dir("lazy").parent_path() / "lazy-load-mark.txt";
  fs::remove(mark);
  ::setenv("K3_FIXTURE_LOAD_MARK", mark.c_str(), 1);
  PluginHost host({fixture_dir("lazy")});
  CHECK(loaded_names(mark).empty());  // the scan reads file names only
  CHECK(host.create_cache("fxasked", {}) != nullptr);
  CHECK(loaded_names(mark) == "fxasked\n");
  CHECK(lists(host, PluginKind::cache, "fxbystander"));  // plugins(): everything, for `k3host plugins`
  CHECK(loaded_names(mark) == "fxasked\nfxbystander\n");
  ::unsetenv("K3_FIXTURE_LOAD_MARK");
}

TEST_CASE("a plugin file or folder that others can write is refused without being opened", "[plugin_host]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  const fs::path dir = fixture_dir("good").parent_path() / "writable";
  fs::remove_all(dir);
  fs::create_directories(dir);
  ::chmod(dir.c_str(), 0755);
  const fs::path file = dir / "k3-cache-fxgood.so";
  fs::copy_file(fixture_file("good", "cache", "fxgood"), file);
  SECTION("a file everyone can write") {
    ::chmod(file.c_str(), 0757);
    PluginHost host({dir});
    const std::string error = find_error(host, PluginKind::cache, "fxgood");
    check_one_line_naming(error, file);
    CHECK_THAT(error, Contains("writable by everyone"));
    CHECK_THAT(single_refusal(host, file), Contains("chmod go-w"));
  }
  SECTION("a folder its group can write") {
    ::chmod(file.c_str(), 0755);
    ::chmod(dir.c_str(), 0775);
    PluginHost host({dir});
    const std::string error = find_error(host, PluginKind::cache, "fxgood");
    CHECK_THAT(error, Contains("plugin folder " + dir.string() + " is writable by its group"));
    CHECK_FALSE(lists(host, PluginKind::cache, "fxgood"));
  }
  SECTION("the same file and folder, not writable by others, load") {
    ::chmod(file.c_str(), 0755);
    PluginHost host({dir});
    CHECK(host.find(PluginKind::cache, "fxgood").path == file);
  }
}
