// Backend-specific behaviour of `direct`, `uring` and `mmap`: O_DIRECT refusal and the
// buffered fallback, alignment, parameter validation.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "conformance_support.hpp"

using k3::sdk::StatusCode;
using namespace k3test;

namespace {
// procfs refuses O_DIRECT with EINVAL at open (checked on Linux 6.x).
constexpr const char* kNoDirectFile = "/proc/version";

bool o_direct_refused_here() {
  const int fd = ::open(kNoDirectFile, O_RDONLY | O_DIRECT);
  if (fd >= 0) ::close(fd);
  return fd < 0 && errno == EINVAL;
}
}  // namespace

TEST_CASE("direct: a filesystem refusing O_DIRECT is refused clearly, unless fallback=buffered", "[direct]") {
  if (!o_direct_refused_here()) {
    WARN("SKIPPED: " << kNoDirectFile << " accepts O_DIRECT here; no filesystem to test the refusal on");
    return;
  }
  auto strict = plugin_host().create_storage("direct", {});
  std::unique_ptr<k3::sdk::StorageFile> file;
  const k3::sdk::Status st = strict->open(kNoDirectFile, file);
  CHECK(st.code == StatusCode::unsupported);
  CHECK_THAT(st.detail,
             Catch::Contains(kNoDirectFile) && Catch::Contains("O_DIRECT") && Catch::Contains("fallback=buffered"));

  auto lenient = plugin_host().create_storage("direct", {{"fallback", "buffered"}});
  REQUIRE(lenient->open(kNoDirectFile, file).ok());
  CHECK(file->alignment() == 1);

  auto uring = try_create({"uring direct", "uring", {{"direct", "true"}}});
  if (uring) {
    const k3::sdk::Status us = uring->open(kNoDirectFile, file);
    CHECK(us.code == StatusCode::unsupported);
    CHECK_THAT(us.detail, Catch::Contains("O_DIRECT"));
  }
}

TEST_CASE("direct and uring direct=true prefer 4096 alignment, the others 1", "[direct]") {
  TempDir dir;
  const auto path = (dir.path() / "a.bin").string();
  write_file(path, random_bytes(10000, 1));
  CHECK(open_file(*plugin_host().create_storage("direct", {}), path)->alignment() == 4096);
  CHECK(open_file(*plugin_host().create_storage("mmap", {}), path)->alignment() == 1);
  if (auto uring = try_create({"uring direct", "uring", {{"direct", "true"}}}))
    CHECK(open_file(*uring, path)->alignment() == 4096);
  if (auto uring = try_create({"uring", "uring", {}})) CHECK(open_file(*uring, path)->alignment() == 1);
}

TEST_CASE("direct, uring, mmap: bad parameters are refused naming the key", "[direct]") {
  auto refused = [](const std::string& plugin, const k3::PluginParams& params, const std::string& key) {
    INFO(plugin << " " << key);
    CHECK_THROWS_WITH(plugin_host().create_storage(plugin, params), Catch::Contains(key));
  };
  refused("direct", {{"threads", "0"}}, "threads");
  refused("direct", {{"threads", "two"}}, "threads");
  refused("direct", {{"fallback", "maybe"}}, "fallback");
  refused("direct", {{"thread", "2"}}, "thread");
  refused("mmap", {{"advice", "often"}}, "advice");
  refused("uring", {{"queue_depth", "0"}}, "queue_depth");
  refused("uring", {{"direct", "perhaps"}}, "direct");
}

TEST_CASE("an empty file: size 0, zero-length reads succeed, any byte is short_read", "[direct]") {
  TempDir dir;
  const auto path = (dir.path() / "empty.bin").string();
  write_file(path, {});
  for (const auto& config : all_backend_configs()) {
    INFO("backend " << config.label);
    auto backend = try_create(config);
    if (!backend) continue;
    auto file = open_file(*backend, path);
    CHECK(file->size() == 0);
    std::vector<OwnedRequest> owned;
    owned.emplace_back(0, 0);
    owned.emplace_back(0, 1);
    const k3::sdk::Status st = read_batch(*file, owned);
    CHECK(owned[0].request.result == StatusCode::ok);
    CHECK(st.code == StatusCode::short_read);
  }
}
