// Every plugin of this build, and the SDK example, against its own parameter table: the
// table is there and well-formed, every key it describes is one the factory reads (set them
// all: nothing comes back unknown), every key it does not describe comes back unknown, and
// the host's check (check_params, before creation) refuses exactly what the factory's
// ParamReader refuses, in the same words.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <k3/error.hpp>
#include <k3/plugin_host.hpp>

#include "fixture_env.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using k3::PluginHost;
using k3::PluginInfo;
using k3::PluginKind;
using k3::PluginParams;

namespace {

/// A folder for this test process, removed at the end.
struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("k3-plugin-params-" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

/// A rank file of the 256 single bytes, ranks 0..255: the smallest a tiktoken tokenizer loads.
fs::path byte_ranks(const fs::path& dir) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const fs::path file = dir / "bytes.tiktoken";
  std::ofstream out(file);
  for (int b = 0; b < 256; ++b) out << alphabet[b >> 2] << alphabet[(b & 3) << 4] << "== " << b << "\n";
  return file;
}

/// The plugins this build ships (the real plugin folder) and the in-tree SDK example.
std::vector<PluginInfo> shipped(const PluginHost& host) {
  std::vector<PluginInfo> out;
  for (const auto& p : host.plugins())
    if (p.path.parent_path() == fs::path(K3_PLUGIN_DIR) ||
        p.path.parent_path() == k3::test::fixture_dir("example-clock"))
      out.push_back(p);
  return out;
}

/// A value `d` accepts: its default, else the low end of its interval, else its first choice.
std::string valid_value(const k3::sdk::ParamDescriptor& d) {
  if (d.default_value != nullptr) return d.default_value;
  if (d.type == K3_PARAM_BOOL) return "true";
  if (d.type == K3_PARAM_ENUM) return std::string(d.allowed).substr(0, std::string(d.allowed).find('|'));
  if (d.type == K3_PARAM_INTEGER || d.type == K3_PARAM_NUMBER) {
    k3::sdk::detail::Interval iv;
    if (d.allowed != nullptr && k3::sdk::detail::parse_interval(d.allowed, iv) && !iv.lo.empty() && !iv.lo_open)
      return std::string(iv.lo);
    return "1";
  }
  return "";
}

/// Every key `info` describes set to a value it accepts; what a plugin needs to be created
/// here (a folder, a rank file, an inner backend that opens nothing) from `needs`.
PluginParams every_key(const PluginInfo& info, const PluginParams& needs) {
  PluginParams out = needs;
  auto set = [&](const std::string& k, const std::string& v, bool replace) {
    for (auto& kv : out)
      if (kv.first == k) {
        if (replace) kv.second = v;
        return;
      }
    out.emplace_back(k, v);
  };
  for (const auto& d : info.params)
    if (!k3::sdk::detail::is_family(d)) set(d.key, valid_value(d), false);
  for (const auto& d : info.params) {
    if (!k3::sdk::detail::is_family(d) || (d.flags & K3_PARAM_STORAGE_PARAMS) == 0) continue;
    // A decorator's inner.*: an inner backend that opens nothing, and one of its keys, so the
    // forwarding is read too.
    const std::string prefix(d.key, std::string(d.key).size() - 1);  // "inner."
    set(prefix.substr(0, prefix.size() - 1), "throttle", true);
    set(prefix + "latency_us", "0", true);
  }
  return out;
}

/// The creation, or the reason this machine cannot create the plugin (a missing CPU
/// feature or kernel facility), which is not this test's business.
std::string create(PluginHost& host, const PluginInfo& info, const PluginParams& params,
                   std::vector<std::string>& unknown) {
  try {
    switch (info.kind) {
      case PluginKind::storage: (void)host.create_storage(info.name, params, &unknown); break;
      case PluginKind::cache: (void)host.create_cache(info.name, params, &unknown); break;
      case PluginKind::kernels: (void)host.create_kernels(info.name, params, &unknown); break;
      case PluginKind::tokenizer: (void)host.create_tokenizer(info.name, params, &unknown); break;
      case PluginKind::transport: (void)host.create_transport(info.name, params, &unknown); break;
    }
  } catch (const k3::UsageError& e) {
    return e.what();
  }
  return {};
}

bool unavailable_here(const std::string& error) {
  return error.find("io_uring is not available") != std::string::npos ||
         error.find("cannot run on this CPU") != std::string::npos ||
         error.find("this CPU (or its OS) lacks") != std::string::npos;
}

}  // namespace

TEST_CASE("every plugin describes its parameters, and its factory reads exactly those", "[plugin_host][params]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  PluginHost host({k3::test::fixture_dir("example-clock")});
  Scratch scratch;
  const auto files = host.create_storage("posix", {});
  host.set_file_storage(files);  // the tokenizer reads its rank file through it
  const PluginParams needs_dir{{"dir", (scratch.dir / "tier").string()}};
  const PluginParams needs_model{{"model", byte_ranks(scratch.dir).string()}};

  const auto plugins = shipped(host);
  REQUIRE(plugins.size() >= 15);  // 8 storage, 5 cache, scalar, tiktoken, the example
  CHECK(host.problems().empty());
  for (const PluginInfo& info : plugins) {
    INFO(k3::to_string(info.kind) << " " << info.name);
    CHECK(info.describes_params);
    CHECK(k3::sdk::table_problem(info.params).empty());
    const PluginParams needs = info.name == "tiered"     ? needs_dir
                               : info.name == "tiktoken" ? needs_model
                                                         : PluginParams{};

    // Every described key set: the host's check passes and the factory reads them all.
    const PluginParams all = every_key(info, needs);
    CHECK(k3::check_params(info, all, &host).empty());
    std::vector<std::string> unknown;
    const std::string error = create(host, info, all, unknown);
    if (unavailable_here(error)) {
      WARN(info.name << " cannot be created here: " << error);
      continue;
    }
    CHECK(error.empty());
    CHECK(unknown.empty());

    // A key it does not describe: refused by the host's check, and left unread by the factory.
    PluginParams extra = needs;
    extra.emplace_back("no_such_parameter", "1");
    const auto issues = k3::check_params(info, extra, &host);
    REQUIRE(issues.size() == 1);
    CHECK(issues[0].key == "no_such_parameter");
    CHECK_THAT(issues[0].message, Contains("has no parameter 'no_such_parameter'"));
    unknown.clear();
    CHECK(create(host, info, extra, unknown).empty());
    CHECK(unknown == std::vector<std::string>{"no_such_parameter"});
  }
}

TEST_CASE("the host refuses a bad value in the words the plugin's own reader uses", "[plugin_host][params]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  PluginHost host({k3::test::fixture_dir("example-clock")});
  Scratch scratch;
  std::size_t compared = 0;
  for (const PluginInfo& info : shipped(host)) {
    if (info.kind == PluginKind::tokenizer || info.name == "tiered") continue;  // need files to be created at all
    for (const auto& d : info.params) {
      // Just past an interval's low end, or a word no bool or enum takes.
      std::string bad;
      k3::sdk::detail::Interval iv;
      if ((d.type == K3_PARAM_INTEGER || d.type == K3_PARAM_NUMBER) && d.allowed != nullptr &&
          k3::sdk::detail::parse_interval(d.allowed, iv) && !iv.lo.empty())
        bad = iv.lo_open ? std::string(iv.lo) : "-1";  // every low end here is >= 0
      else if (d.type == K3_PARAM_BOOL || d.type == K3_PARAM_ENUM)
        bad = "not-a-choice";
      else
        continue;
      INFO(info.name << "." << d.key << " = " << bad);
      const auto issues = k3::check_params(info, {{d.key, bad}});
      REQUIRE(issues.size() == 1);
      CHECK(issues[0].key == d.key);
      CHECK_THAT(issues[0].message, Contains(std::string("(") + d.meaning + ")"));
      std::vector<std::string> unknown;
      const std::string error = create(host, info, {{d.key, bad}}, unknown);
      CHECK_THAT(error, Contains(std::string(d.key) + ": " + issues[0].message));
      ++compared;
    }
  }
  CHECK(compared >= 30);
}

TEST_CASE("unknown keys suggest the closest described key and list them all", "[plugin_host][params]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  PluginHost host;
  const PluginInfo& uring = host.find(PluginKind::storage, "uring");
  CHECK(k3::unknown_params_message(uring, {"Queue_Depth"}) ==
        "has no parameter 'Queue_Depth' (did you mean 'queue_depth'?); it takes queue_depth, direct "
        "(k3host plugins --params uring)");
  CHECK(k3::unknown_params_message(host.find(PluginKind::storage, "posix"), {"a", "b"}) ==
        "has no parameters 'a', 'b': it takes none");
  // A decorator's forwarded keys are the inner plugin's: checked against it, prefix kept.
  const PluginInfo& throttle = host.find(PluginKind::storage, "throttle");
  const auto issues = k3::check_params(throttle, {{"inner", "uring"}, {"inner.queue_depth", "0"}}, &host);
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].key == "inner.queue_depth");
  CHECK_THAT(issues[0].message, Contains("0 is out of range 1–4096"));
  const auto nested = k3::check_params(throttle, {{"inner", "tiered"}}, &host);
  REQUIRE(nested.size() == 1);
  CHECK(nested[0].key == "inner.dir");
  CHECK(nested[0].missing);
  const auto wrong = k3::check_params(throttle, {{"inner", "URING"}}, &host);
  REQUIRE(wrong.size() == 1);
  CHECK_THAT(wrong[0].message, Contains("did you mean 'uring'"));
  // Without a host, only the decorator's own table is checked.
  CHECK(k3::check_params(throttle, {{"inner", "uring"}, {"inner.queue_depth", "0"}}).empty());
}
