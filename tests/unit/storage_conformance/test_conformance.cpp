// Every storage backend returns the same bytes and the same errors (sdk/k3/storage.hpp).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "conformance_support.hpp"

using k3::sdk::ReadRequest;
using k3::sdk::StatusCode;
using namespace k3test;

namespace {

constexpr std::uint64_t kFileSize = (std::uint64_t{3} << 20) + 12345;  // not a multiple of 4096

/// Reads `count` random batches and compares every byte with `data`.
void check_random_batches(k3::sdk::StorageFile& file, const std::vector<std::byte>& data, std::uint64_t seed,
                          int batches) {
  std::mt19937_64 rng(seed);
  for (int b = 0; b < batches; ++b) {
    const std::size_t n = 1 + rng() % 16;
    std::vector<RandomRequest> wanted;
    std::vector<GuardedBuffer> buffers;
    std::vector<ReadRequest> batch;
    for (std::size_t i = 0; i < n; ++i) {
      wanted.push_back(random_request(rng, data.size()));
      buffers.emplace_back(wanted.back().length, wanted.back().shift);
    }
    for (std::size_t i = 0; i < n; ++i)
      batch.push_back({wanted[i].offset, wanted[i].length, buffers[i].data(), StatusCode::internal});
    const k3::sdk::Status st = file.read(batch);
    INFO("batch " << b << ": " << st.detail);
    REQUIRE(st.ok());
    for (std::size_t i = 0; i < n; ++i) {
      INFO("request offset " << wanted[i].offset << " length " << wanted[i].length << " shift " << wanted[i].shift);
      CHECK(batch[i].result == StatusCode::ok);
      CHECK(std::memcmp(buffers[i].data(), data.data() + wanted[i].offset, wanted[i].length) == 0);
      CHECK(buffers[i].guards_intact());
    }
  }
}

}  // namespace

TEST_CASE("every backend: random batches of aligned and unaligned reads round-trip", "[conformance]") {
  TempDir dir;
  const auto data = random_bytes(kFileSize, 41);
  const auto path = (dir.path() / "data.bin").string();
  write_file(path, data);
  for (const auto& config : all_backend_configs()) {
    INFO("backend " << config.label);
    auto backend = try_create(config);
    if (!backend) continue;
    auto file = open_file(*backend, path);
    CHECK(file->size() == kFileSize);
    const std::uint32_t a = file->alignment();
    CHECK((a >= 1 && (a & (a - 1)) == 0));
    check_random_batches(*file, data, 7, 12);
    // A whole-file read, and the last byte alone.
    GuardedBuffer whole(kFileSize, 0);
    GuardedBuffer last(1, 3);
    std::vector<ReadRequest> batch{{0, kFileSize, whole.data(), StatusCode::internal},
                                   {kFileSize - 1, 1, last.data(), StatusCode::internal}};
    REQUIRE(file->read(batch).ok());
    CHECK(std::memcmp(whole.data(), data.data(), kFileSize) == 0);
    CHECK(last.data()[0] == data.back());
    CHECK((whole.guards_intact() && last.guards_intact()));
  }
}

TEST_CASE("every backend: past the end is short_read naming the offset, the rest of the batch is read",
          "[conformance]") {
  TempDir dir;
  const auto data = random_bytes(kFileSize, 42);
  const auto path = (dir.path() / "data.bin").string();
  write_file(path, data);
  for (const auto& config : all_backend_configs()) {
    INFO("backend " << config.label);
    auto backend = try_create(config);
    if (!backend) continue;
    auto file = open_file(*backend, path);
    const std::uint64_t straddle = kFileSize - 100;
    std::vector<OwnedRequest> owned;
    owned.emplace_back(0, 5000);
    owned.emplace_back(straddle, 4096);        // straddles the end
    owned.emplace_back(kFileSize + 8192, 10);  // wholly past the end
    owned.emplace_back(kFileSize, 0);          // zero-length at the end: fine
    const k3::sdk::Status st = read_batch(*file, owned);
    CHECK(st.code == StatusCode::short_read);
    CHECK_THAT(st.detail, Catch::Contains("offset " + std::to_string(straddle)));
    CHECK_THAT(st.detail, Catch::Contains("got 100 of 4096"));
    CHECK(owned[0].request.result == StatusCode::ok);
    CHECK(std::memcmp(owned[0].buffer.data(), data.data(), 5000) == 0);
    CHECK(owned[1].request.result == StatusCode::short_read);
    CHECK(owned[2].request.result == StatusCode::short_read);
    CHECK(owned[3].request.result == StatusCode::ok);
  }
}

TEST_CASE("every backend: a missing file is not_found, a directory is refused", "[conformance]") {
  TempDir dir;
  for (const auto& config : all_backend_configs()) {
    INFO("backend " << config.label);
    auto backend = try_create(config);
    if (!backend) continue;
    std::unique_ptr<k3::sdk::StorageFile> file;
    const auto missing = (dir.path() / "no-such.bin").string();
    const k3::sdk::Status st = backend->open(missing, file);
    CHECK(st.code == StatusCode::not_found);
    CHECK_THAT(st.detail, Catch::Contains("no-such.bin"));
    CHECK(file == nullptr);
    CHECK_FALSE(backend->open(dir.path().string(), file).ok());
  }
}

TEST_CASE("every backend: one file read from four threads at once", "[conformance]") {
  TempDir dir;
  const auto data = random_bytes(kFileSize, 43);
  const auto path = (dir.path() / "data.bin").string();
  write_file(path, data);
  for (const auto& config : all_backend_configs()) {
    INFO("backend " << config.label);
    auto backend = try_create(config);
    if (!backend) continue;
    auto file = open_file(*backend, path);
    std::vector<std::thread> threads;
    std::vector<int> mismatches(4, 0);
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(static_cast<std::uint64_t>(100 + t));
        for (int b = 0; b < 6; ++b) {
          std::vector<GuardedBuffer> buffers;
          std::vector<RandomRequest> wanted;
          std::vector<ReadRequest> batch;
          for (int i = 0; i < 6; ++i) {
            wanted.push_back(random_request(rng, kFileSize));
            buffers.emplace_back(wanted.back().length, wanted.back().shift);
          }
          for (std::size_t i = 0; i < wanted.size(); ++i)
            batch.push_back({wanted[i].offset, wanted[i].length, buffers[i].data(), StatusCode::internal});
          if (!file->read(batch).ok()) ++mismatches[static_cast<std::size_t>(t)];
          for (std::size_t i = 0; i < wanted.size(); ++i)
            if (std::memcmp(buffers[i].data(), data.data() + wanted[i].offset, wanted[i].length) != 0 ||
                !buffers[i].guards_intact())
              ++mismatches[static_cast<std::size_t>(t)];
        }
      });
    for (auto& t : threads) t.join();
    CHECK(mismatches == std::vector<int>(4, 0));
  }
}

TEST_CASE("every backend but mmap: a file truncated after open gives short_read", "[conformance]") {
  TempDir dir;
  const auto data = random_bytes(kFileSize, 44);
  for (const auto& config : all_backend_configs()) {
    if (config.maps_file) continue;  // would raise SIGBUS, as its README says
    INFO("backend " << config.label);
    auto backend = try_create(config);
    if (!backend) continue;
    const auto path = (dir.path() / "shrinks.bin").string();
    write_file(path, data);
    auto file = open_file(*backend, path);
    std::filesystem::resize_file(path, 10000);
    std::vector<OwnedRequest> owned;
    owned.emplace_back(8192, 8192);
    const k3::sdk::Status st = read_batch(*file, owned);
    CHECK(st.code == StatusCode::short_read);
    CHECK_THAT(st.detail, Catch::Contains("offset 8192"));
    CHECK_THAT(st.detail, Catch::Contains("got 1808 of 8192"));
  }
}

TEST_CASE("the host finds every storage backend built in this tree", "[conformance]") {
  std::vector<std::string> names;
  for (const auto& config : all_backend_configs())
    if (config.params.empty()) names.push_back(config.plugin);
  for (const char* expected : {"posix", "direct", "uring", "mmap", "throttle", "faulty"}) {
    INFO(expected);
    CHECK(std::find(names.begin(), names.end(), expected) != names.end());
  }
}

TEST_CASE("every backend: list() names the regular files of a folder, and a missing folder is not_found",
          "[conformance]") {
  TempDir dir;
  for (const char* name : {"a.safetensors", "config.json", "b"}) std::ofstream(dir.path() / name) << name;
  std::filesystem::create_directory(dir.path() / "sub");
  std::filesystem::create_symlink(dir.path() / "b", dir.path() / "link-to-b");
  const std::vector<std::string> expected{"a.safetensors", "b", "config.json", "link-to-b"};
  int listed = 0;
  for (const auto& config : all_backend_configs()) {
    INFO("backend " << config.label);
    auto backend = try_create(config);
    if (!backend) continue;
    std::vector<std::string> names{"stale"};
    for (const std::string& uri : {dir.path().string(), dir.path().string() + "/"}) {
      const k3::sdk::Status st = backend->list(uri, names);
      INFO(uri << ": " << st.detail);
      REQUIRE(st.ok());
      std::sort(names.begin(), names.end());
      CHECK(names == expected);  // no "sub", no ".", no "stale"
    }
    const auto missing = (dir.path() / "no-such-folder").string();
    const k3::sdk::Status st = backend->list(missing, names);
    CHECK(st.code == StatusCode::not_found);
    CHECK_THAT(st.detail, Catch::Contains("no-such-folder"));
    ++listed;
  }
  CHECK(listed >= 6);  // posix, direct, uring or its refusal, mmap, throttle, faulty
}
