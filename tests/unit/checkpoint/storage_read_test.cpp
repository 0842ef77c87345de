// The checkpoint is read only through the storage plugin: URIs are joined as strings (a
// folder or a URL, with or without a trailing slash), small files are read whole under a
// cap, a backend that cannot list needs the index json (which then names the shards), and
// a missing file is a UsageError naming its URI.
#include <catch2/catch.hpp>

#include <k3/checkpoint.hpp>
#include <k3/error.hpp>
#include <k3/model_config.hpp>
#include <k3/plugin_host.hpp>

#include "checkpoint_test_util.hpp"
#include "io/small_file.hpp"
#include "io/uri.hpp"
#include "local_storage.hpp"

namespace fs = std::filesystem;
using namespace k3;
using namespace k3::test;

namespace {

/// The posix backend, except that it cannot list a folder (as an http backend cannot), and
/// a count of its opens per URI.
class NoListStorage final : public sdk::StorageBackend {
 public:
  sdk::Status open(std::string_view uri, std::unique_ptr<sdk::StorageFile>& out) noexcept override {
    ++opens[std::string(uri)];
    return local_storage().open(uri, out);
  }
  sdk::Status list(std::string_view uri, std::vector<std::string>&) noexcept override {
    return sdk::Status::error(sdk::StatusCode::unsupported, "no listing of " + std::string(uri));
  }
  std::map<std::string, int> opens;
};

fs::path tiny_copy(const std::string& tag) {
  const fs::path dir = fresh_dir(tag) / "model";
  fs::copy(test_model("tiny"), dir, fs::copy_options::recursive);
  return dir;
}

template <class F>
std::string usage_error(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    CHECK(e.code() == ExitCode::usage);
    return e.what();
  }
  FAIL("no UsageError");
  return {};
}

}  // namespace

TEST_CASE("join_uri puts exactly one slash between a folder or URL and a file name", "[uri]") {
  CHECK(io::join_uri("/data/Kimi-K3", "config.json") == "/data/Kimi-K3/config.json");
  CHECK(io::join_uri("/data/Kimi-K3/", "config.json") == "/data/Kimi-K3/config.json");
  CHECK(io::join_uri("models/demo", "tiktoken.model") == "models/demo/tiktoken.model");
  CHECK(io::join_uri("https://host/Kimi-K3", "config.json") == "https://host/Kimi-K3/config.json");
  CHECK(io::join_uri("https://host/Kimi-K3/", "config.json") == "https://host/Kimi-K3/config.json");
  CHECK(io::join_uri("counted:///tmp/m", "a.safetensors") == "counted:///tmp/m/a.safetensors");
  CHECK(io::join_uri("", "config.json") == "config.json");
  CHECK(checkpoint_file_uri("https://host/K3/", "x") == "https://host/K3/x");

  // Under an http(s) base the name is one percent-encoded path segment; elsewhere it is a
  // file name as it is.
  CHECK(io::join_uri("https://host/K3", "a b?#%.safetensors") == "https://host/K3/a%20b%3F%23%25.safetensors");
  CHECK(io::join_uri("HTTP://host/K3/", "x-y_z~1.json") == "HTTP://host/K3/x-y_z~1.json");
  CHECK(io::join_uri("http://host/K3/", "\xc3\xa9.safetensors") == "http://host/K3/%C3%A9.safetensors");
  CHECK(io::join_uri("/data/K3", "a b?#.safetensors") == "/data/K3/a b?#.safetensors");
  CHECK(io::join_uri("counted:///tmp/m", "a b.safetensors") == "counted:///tmp/m/a b.safetensors");

  CHECK(io::has_uri_scheme("https://host/K3"));
  CHECK(io::has_uri_scheme("counted:///tmp/m"));
  CHECK(io::has_uri_scheme("s3+http://b/k"));
  CHECK_FALSE(io::has_uri_scheme("/data/Kimi-K3"));
  CHECK_FALSE(io::has_uri_scheme("models/demo"));
  CHECK_FALSE(io::has_uri_scheme("dir/https://x"));
  CHECK_FALSE(io::has_uri_scheme("://x"));
  CHECK_FALSE(io::has_uri_scheme("1http://x"));
}

TEST_CASE("a small file is read whole through the backend up to its cap, and refused above it", "[uri][bad_input]") {
  const fs::path dir = fresh_dir("small-file");
  const std::string text(100, 'k');
  write_file(dir / "f.json", text);
  const std::string uri = io::join_uri(dir.string(), "f.json");

  const auto whole = io::read_small_file(local_storage(), uri, 100, "a test file");
  CHECK(std::string_view(whole.data(), whole.size()) == text);
  const std::string msg = usage_error([&] { (void)io::read_small_file(local_storage(), uri, 99, "a test file"); });
  CHECK_THAT(msg, Catch::Contains(uri) && Catch::Contains("100 bytes") && Catch::Contains("99"));

  std::string out = "old";
  CHECK(io::try_read_small_file(local_storage(), uri, 100, out).ok());
  CHECK(out == text);
  const sdk::Status too_big = io::try_read_small_file(local_storage(), uri, 99, out);
  CHECK(too_big.code == sdk::StatusCode::invalid_argument);
  CHECK_THAT(too_big.detail, Catch::Contains(uri));
  CHECK(io::try_read_small_file(local_storage(), uri + ".missing", 100, out).code == sdk::StatusCode::not_found);
  CHECK_THAT(usage_error([&] { (void)io::read_small_file(local_storage(), uri + ".missing", 100, "the thing"); }),
             Catch::Contains(uri + ".missing") && Catch::Contains("the thing not found"));
}

TEST_CASE("a missing config.json is a UsageError naming its URI", "[uri][bad_input]") {
  const fs::path dir = tiny_copy("no-config");
  fs::remove(dir / "config.json");
  CHECK_THAT(usage_error([&] { (void)read_config(dir); }),
             Catch::Contains(dir.string() + "/config.json") && Catch::Contains("not found"));
  // A trailing slash on the checkpoint makes no double slash.
  CHECK_THAT(usage_error([&] { (void)read_model_config(local_storage(), dir.string() + "/"); }),
             Catch::Contains(dir.string() + "/config.json"));
  CHECK_THAT(usage_error([&] { (void)open_index(fresh_dir("no-checkpoint") / "nowhere"); }),
             Catch::Contains("nowhere") && Catch::Contains("no checkpoint folder"));
}

TEST_CASE("a folder where config.json or the index json should be is a UsageError, not an I/O failure",
          "[uri][bad_input]") {
  for (const char* name : {"config.json", "model.safetensors.index.json"}) {
    CAPTURE(name);
    const fs::path dir = tiny_copy(std::string("folder-") + name);
    fs::remove(dir / name);
    fs::create_directory(dir / name);
    CHECK_THAT(usage_error([&] {
                 (void)read_config(dir);
                 (void)open_index(dir);
               }),
               Catch::Contains(dir.string() + "/" + name) && Catch::Contains("is a directory"));
  }
}

TEST_CASE("a backend that cannot list reads the shards the index json names", "[uri][index]") {
  const fs::path dir = tiny_copy("no-list");
  const auto listed = open_index(dir);
  NoListStorage storage;
  const auto named = CheckpointIndex::open(storage, dir.string() + "/");
  REQUIRE(named.files().size() == listed.files().size());
  REQUIRE(named.files().size() > 1);  // tiny is written in several shards
  for (std::size_t i = 0; i < named.files().size(); ++i) {
    CHECK(named.files()[i].name == listed.files()[i].name);
    CHECK(named.files()[i].uri == dir.string() + "/" + named.files()[i].name);
    CHECK(named.files()[i].size == listed.files()[i].size);
    CHECK(storage.opens[named.files()[i].uri] == 1);  // one open per shard header
  }
  CHECK(storage.opens[dir.string() + "/model.safetensors.index.json"] == 1);
  REQUIRE(named.tensors().size() == listed.tensors().size());
  for (std::size_t i = 0; i < named.tensors().size(); ++i) {
    CHECK(named.tensors()[i].name == listed.tensors()[i].name);
    CHECK(named.tensors()[i].offset == listed.tensors()[i].offset);
  }
}

TEST_CASE("without listing, the index json is required and its shard names must be file names",
          "[uri][index][bad_input]") {
  NoListStorage storage;
  const fs::path dir = tiny_copy("no-list-no-index");
  fs::remove(dir / "model.safetensors.index.json");
  CHECK_THAT(usage_error([&] { (void)CheckpointIndex::open(storage, dir.string()); }),
             Catch::Contains(dir.string() + "/model.safetensors.index.json") && Catch::Contains("required") &&
                 Catch::Contains("cannot list"));
  // Listing works for the same folder through posix, which needs no index.
  CHECK_FALSE(open_index(dir).tensors().empty());

  const fs::path evil = tiny_copy("no-list-evil");
  const fs::path index_json = evil / "model.safetensors.index.json";
  const std::string json = read_file(index_json);
  const auto q = json.find(".safetensors\"");
  REQUIRE(q != std::string::npos);
  const auto start = json.rfind('"', q);
  const std::string shard = json.substr(start + 1, q + 12 - start - 1);
  write_file(index_json, replace_once(json, "\"" + shard + "\"", "\"../" + shard + "\""));
  CHECK_THAT(usage_error([&] { (void)CheckpointIndex::open(storage, evil.string()); }),
             Catch::Contains("../" + shard) && Catch::Contains("not a plain .safetensors file name"));
}

TEST_CASE("a shard name must be a plain file name, the same rule for a listed folder and the index",
          "[uri][index][bad_input]") {
  for (const char* good : {"model-00001-of-00064.safetensors", "a b?#&+.safetensors", "\xc3\xa9.safetensors", "..x"})
    CHECK(io::plain_name_problem(good).empty());
  for (const char* bad : {"", ".", "..", "../x.safetensors", "a/b.safetensors", "a\\b.safetensors",
                          "%2e%2e%2fx.safetensors", "a\tb.safetensors", "a\x7f.safetensors"})
    CHECK_FALSE(io::plain_name_problem(bad).empty());
  CHECK(io::shown_name("a\x01"
                       "b\n") == "a\\x01b\\x0a");  // split: \x01b would be one escape

  // Names from the index (a backend that cannot list), and from a listing (posix).
  NoListStorage storage;
  for (const std::string& name : {std::string("%2e%2e%2fx.safetensors"), std::string("a\x01"
                                                                                     "b.safetensors")}) {
    const fs::path dir = tiny_copy("bad-name-index");
    const fs::path index_json = dir / "model.safetensors.index.json";
    const std::string json = read_file(index_json);
    const auto q = json.find(".safetensors\"");
    REQUIRE(q != std::string::npos);
    const auto start = json.rfind('"', q);
    const std::string shard = json.substr(start + 1, q + 12 - start - 1);
    const std::string escaped = name[1] == '\x01' ? "a\\u0001b.safetensors" : name;
    write_file(index_json, replace_once(json, "\"" + shard + "\"", "\"" + escaped + "\""));
    for (const bool listing : {false, true}) {
      INFO((listing ? "listed" : "named by the index") << ": " << io::shown_name(name));
      const std::string what =
          usage_error([&] { (void)(listing ? open_index(dir) : CheckpointIndex::open(storage, dir.string())); });
      CHECK_THAT(what, Catch::Contains(index_json.string()) &&
                           Catch::Contains("shard '" + io::shown_name(name) + "'") &&
                           Catch::Contains("not a plain .safetensors file name"));
    }
  }
  // A listed folder holding a shard whose name has '%': refused naming the folder and the name.
  const fs::path pct = tiny_copy("bad-name-listed");
  const fs::path index_json = pct / "model.safetensors.index.json";
  const std::string json = read_file(index_json);
  const auto q = json.find(".safetensors\"");
  const auto start = json.rfind('"', q);
  const std::string shard = json.substr(start + 1, q + 12 - start - 1);
  fs::rename(pct / shard, pct / "a%41.safetensors");
  CHECK_THAT(usage_error([&] { (void)open_index(pct); }),
             Catch::Contains(pct.string()) && Catch::Contains("shard 'a%41.safetensors' is not a plain file name"));
}

TEST_CASE("HostServices::read_file reads through the storage the host was given, capped", "[uri][host]") {
  const fs::path dir = fresh_dir("host-read");
  write_file(dir / "ranks.txt", "abc");
  const std::string uri = (dir / "ranks.txt").string();
  PluginHost host;
  std::string out;
  // No storage given yet: refused, not read behind the pipeline's back.
  CHECK(host.services().read_file(uri, 10, out).code == sdk::StatusCode::unsupported);
  NoListStorage counted;
  const std::shared_ptr<sdk::StorageBackend> storage(&counted, [](sdk::StorageBackend*) {});
  host.set_file_storage(storage);
  REQUIRE(host.services().read_file(uri, 3, out).ok());
  CHECK(out == "abc");
  CHECK(counted.opens[uri] == 1);
  const sdk::Status capped = host.services().read_file(uri, 2, out);
  CHECK(capped.code == sdk::StatusCode::invalid_argument);
  CHECK_THAT(capped.detail, Catch::Contains(uri));
  CHECK(host.services().read_file(uri + "x", 3, out).code == sdk::StatusCode::not_found);
}
