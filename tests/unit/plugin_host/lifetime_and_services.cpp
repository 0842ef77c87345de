// Objects outlive the PluginHost that made them; HostServices::create_storage builds a
// decorator's inner backend; the search path has a fixed order.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <regex>

#include <catch2/catch.hpp>

#include <k3/error.hpp>
#include <k3/log.hpp>
#include <k3/plugin_host.hpp>

#include "fixture_env.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using k3::PluginHost;
using k3::test::fixture_dir;

namespace {

/// The fixture storage (fxmem) fills byte i of every file with (7·i + 3) mod 256.
std::byte expected_byte(std::uint64_t offset) { return static_cast<std::byte>((7 * offset + 3) % 256); }

/// Reads [offset, offset+length) and checks every byte against the pattern.
void check_read(k3::sdk::StorageFile& file, std::uint64_t offset, std::uint64_t length) {
  std::vector<std::byte> buf(length);
  k3::sdk::ReadRequest req{offset, length, buf.data()};
  const k3::sdk::Status st = file.read({&req, 1});
  REQUIRE(st.ok());
  CHECK(req.result == k3::sdk::StatusCode::ok);
  for (std::uint64_t i = 0; i < length; ++i) REQUIRE(buf[i] == expected_byte(offset + i));
}

/// Sends this process's stderr to a file until finish(), which returns what was written.
class CaptureStderr {
 public:
  explicit CaptureStderr(fs::path file) : file_(std::move(file)) {
    fs::create_directories(file_.parent_path());
    std::fflush(stderr);
    saved_ = ::dup(2);
    const int fd = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~CaptureStderr() { restore(); }
  CaptureStderr(const CaptureStderr&) = delete;
  CaptureStderr& operator=(const CaptureStderr&) = delete;

  std::string finish() {
    restore();
    std::ifstream in(file_);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  fs::path file_;
  int saved_ = -1;
};

class AllEvictable final : public k3::sdk::VictimQuery {
 public:
  [[nodiscard]] bool evictable(k3::sdk::ExpertKey) const noexcept override { return true; }
};

}  // namespace

TEST_CASE("plugin objects stay usable after the PluginHost is destroyed", "[plugin_host][lifetime]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  auto host = std::make_unique<PluginHost>(std::vector<fs::path>{fixture_dir("good")});
  std::shared_ptr<k3::sdk::CachePolicy> policy = host->create_cache("fxgood", {});
  // lazy: the decorator reaches HostServices only at its first open(), after the host is gone.
  std::shared_ptr<k3::sdk::StorageBackend> storage =
      host->create_storage("fxwrap", {{"lazy", "true"}, {"size", "300"}});
  host.reset();

  REQUIRE(policy->reset(2).ok());
  policy->on_insert({1, 7});
  policy->on_insert({2, 9});
  k3::sdk::ExpertKey victim;
  REQUIRE(policy->choose_victim({3, 1}, AllEvictable{}, victim).ok());
  CHECK(victim == k3::sdk::ExpertKey{1, 7});  // FIFO: the first inserted

  std::unique_ptr<k3::sdk::StorageFile> file;
  const k3::sdk::Status st = storage->open("weights.bin", file);
  REQUIRE(st.ok());
  CHECK(file->size() == 300);
  check_read(*file, 250, 50);

  // Destroy in the "wrong" order: the file from the inner backend outlives both backends.
  storage.reset();
  policy.reset();
  check_read(*file, 0, 10);
  file.reset();
}

TEST_CASE("HostServices::create_storage builds a decorator's inner backend", "[plugin_host][services]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  PluginHost host({fixture_dir("good")});

  SECTION("through a decorator plugin") {
    auto storage = host.create_storage("fxwrap", {{"size", "100"}});
    std::unique_ptr<k3::sdk::StorageFile> file;
    REQUIRE(storage->open("a", file).ok());
    CHECK(file->size() == 100);
    check_read(*file, 0, 100);

    std::vector<std::byte> buf(8);
    std::vector<k3::sdk::ReadRequest> batch{{10, 4, buf.data()}, {98, 4, buf.data() + 4}};
    const k3::sdk::Status st = file->read(batch);
    CHECK(st.code == k3::sdk::StatusCode::short_read);
    CHECK(batch[0].result == k3::sdk::StatusCode::ok);
    CHECK(batch[1].result == k3::sdk::StatusCode::short_read);

    std::unique_ptr<k3::sdk::StorageFile> missing;
    CHECK(storage->open("missing", missing).code == k3::sdk::StatusCode::not_found);
  }

  SECTION("directly, as a plugin would call it") {
    std::unique_ptr<k3::sdk::StorageBackend> inner;
    const std::vector<k3::sdk::Param> params{{"size", "16"}};
    REQUIRE(host.services().create_storage("fxmem", params, inner).ok());
    std::unique_ptr<k3::sdk::StorageFile> file;
    REQUIRE(inner->open("b", file).ok());
    CHECK(file->size() == 16);

    const std::vector<k3::sdk::Param> bogus{{"bogus", "1"}};
    const k3::sdk::Status st = host.services().create_storage("fxmem", bogus, inner);
    CHECK(st.code == k3::sdk::StatusCode::invalid_argument);
    CHECK_THAT(st.detail, Contains("'bogus'"));

    const k3::sdk::Status none = host.services().create_storage("fxnothere", {}, inner);
    CHECK(none.code == k3::sdk::StatusCode::invalid_argument);
    CHECK_THAT(none.detail, Contains("storage plugin 'fxnothere' not found"));
  }

  SECTION("a missing inner plugin fails the decorator's creation") {
    try {
      (void)host.create_storage("fxwrap", {{"inner", "fxnothere"}});
      FAIL("create_storage did not throw");
    } catch (const k3::UsageError& e) {
      CHECK_THAT(std::string(e.what()), Contains("fxwrap"));
      CHECK_THAT(std::string(e.what()), Contains("storage plugin 'fxnothere' not found"));
    }
  }

  SECTION("a decorator wrapping itself stops at the nesting limit") {
    try {
      (void)host.create_storage("fxwrap", {{"recurse", "true"}});
      FAIL("create_storage did not throw");
    } catch (const k3::UsageError& e) {
      CHECK_THAT(std::string(e.what()), Contains("nest more than"));
    }
    // The limit is per call chain: ordinary nesting still works afterwards.
    CHECK(host.create_storage("fxwrap", {}) != nullptr);
  }
}

TEST_CASE("a plugin's log lines carry its kind and name", "[plugin_host][services]") {
  const k3::test::ScopedPluginPath env(std::nullopt);
  PluginHost host({fixture_dir("good")});
  auto storage = host.create_storage("fxwrap", {{"lazy", "true"}});
  k3::set_log_level(k3::LogLevel::debug);
  const fs::path log_file = fs::path(K3_BINARY_DIR) / "test-tmp" / "plugin-host-log-file.txt";
  fs::remove(log_file);
  k3::set_log_file(log_file);
  CaptureStderr capture(fs::path(K3_BINARY_DIR) / "test-tmp" / "plugin-host-log.txt");
  std::unique_ptr<k3::sdk::StorageFile> file;
  const k3::sdk::Status st = storage->open("w.bin", file);
  const std::string log = capture.finish();
  k3::set_log_file({});
  k3::set_log_level(k3::LogLevel::info);
  REQUIRE(st.ok());
  // fxwrap logs component "decorator"; the host puts the object's kind/name in front.
  const std::string line = "[storage/fxwrap] debug: decorator: opening w.bin through fxmem";
  CHECK_THAT(log, Contains(line));
  CHECK(std::regex_search(log, std::regex(R"((^|\n)\[storage/fxwrap\] debug: decorator)")));  // no timestamp
  // The same line reaches the log file, after its date and time.
  std::ifstream in(log_file);
  const std::string logged{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  CHECK(std::regex_search(logged, std::regex(R"((^|\n)\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3} )" +
                                             std::string(R"(\[storage/fxwrap\] debug: decorator: opening w\.bin)"))));
}

TEST_CASE("the search path is the core folder, then K3_PLUGIN_PATH, then extra folders", "[plugin_host][path]") {
  const std::string env_value = fixture_dir("throws").string() + "::" + fixture_dir("unknown").string() + ":";
  const k3::test::ScopedPluginPath env(env_value);
  PluginHost host({fixture_dir("good")});

  const auto& path = host.search_path();
  REQUIRE(path.size() == 4);  // the empty entries of K3_PLUGIN_PATH are skipped
  CHECK(fs::weakly_canonical(path[0]) == fs::weakly_canonical(K3_PLUGIN_DIR));
  CHECK(path[1] == fixture_dir("throws"));
  CHECK(path[2] == fixture_dir("unknown"));
  CHECK(path[3] == fixture_dir("good"));

  // plugins() follows the path: core plugins first, then the three fixture folders in order.
  const auto& all = host.plugins();
  auto position = [&](const std::string& name) {
    const auto it = std::find_if(all.begin(), all.end(), [&](const k3::PluginInfo& i) { return i.name == name; });
    REQUIRE(it != all.end());
    return it - all.begin();
  };
  CHECK(position("fxthrows") < position("fxunknown"));
  CHECK(position("fxunknown") < position("fxgood"));
  for (const auto& info : all)
    if (info.path.parent_path() == fs::path(K3_PLUGIN_DIR)) CHECK(position(info.name) < position("fxthrows"));

  // The same folder twice on the path is scanned once: no duplicate-name refusal.
  const k3::test::ScopedPluginPath again(fixture_dir("good").string());
  PluginHost twice({fixture_dir("good")});
  CHECK_NOTHROW(twice.find(k3::PluginKind::cache, "fxgood"));
}
