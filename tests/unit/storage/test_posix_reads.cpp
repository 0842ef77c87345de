// Storage `posix` through the plugin host: successful reads.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "storage_support.hpp"

using k3::sdk::StatusCode;

TEST_CASE("posix storage loads through the plugin host and reports unknown parameters", "[storage][posix]") {
  const k3::PluginInfo& info = k3test::plugin_host().find(k3::PluginKind::storage, "posix");
  CHECK(info.path.filename() == "k3-storage-posix.so");
  REQUIRE(k3test::posix_backend());
  std::vector<std::string> unknown;
  REQUIRE(k3test::plugin_host().create_storage("posix", {{"direct", "true"}, {"depth", "8"}}, &unknown));
  CHECK(unknown == std::vector<std::string>{"direct", "depth"});
}

TEST_CASE("posix storage reports the file size and alignment 1", "[storage][posix]") {
  k3test::TempDir dir;
  for (std::size_t n : {0, 1, 4095, 4096, 100000}) {
    const auto path = dir.path() / ("f" + std::to_string(n));
    k3test::write_file(path, k3test::random_bytes(n, n));
    const auto file = k3test::open_file(*k3test::posix_backend(), path.string());
    CHECK(file->size() == n);
    CHECK(file->alignment() == 1u);
  }
}

TEST_CASE("random batches round-trip the file bytes", "[storage][posix]") {
  k3test::TempDir dir;
  const std::size_t size = 1 << 20;
  const auto data = k3test::random_bytes(size, 1);
  const auto path = dir.path() / "data.bin";
  k3test::write_file(path, data);
  const auto file = k3test::open_file(*k3test::posix_backend(), path.string());

  std::mt19937_64 rng(2);
  std::uniform_int_distribution<std::uint64_t> offset(0, size);
  std::uniform_int_distribution<int> batch_size(1, 40);
  for (int round = 0; round < 50; ++round) {
    std::vector<k3test::OwnedRequest> batch;
    const int n = batch_size(rng);
    for (int i = 0; i < n; ++i) {
      const std::uint64_t off = offset(rng);
      std::uniform_int_distribution<std::uint64_t> length(0, std::min<std::uint64_t>(size - off, 70000));
      batch.emplace_back(off, length(rng));
    }
    batch.emplace_back(0, size);      // the whole file
    batch.emplace_back(size - 1, 1);  // the last byte
    batch.emplace_back(12345, 1);     // overlapping neighbours
    batch.emplace_back(12340, 10);
    REQUIRE(k3test::read_batch(*file, batch).ok());
    for (const auto& o : batch) {
      INFO("round " << round << ": offset " << o.request.offset << ", length " << o.request.length);
      CHECK(o.request.result == StatusCode::ok);
      CHECK(std::memcmp(o.buffer.data(), data.data() + o.request.offset, o.request.length) == 0);
    }
  }
}

TEST_CASE("a zero-length request succeeds anywhere and touches nothing", "[storage][posix]") {
  k3test::TempDir dir;
  const auto path = dir.path() / "small.bin";
  k3test::write_file(path, k3test::random_bytes(100, 3));
  const auto file = k3test::open_file(*k3test::posix_backend(), path.string());
  std::byte canary{0x5A};
  std::vector<k3::sdk::ReadRequest> batch = {
      {0, 0, &canary, StatusCode::internal},
      {100, 0, &canary, StatusCode::internal},   // at the end of the file
      {5000, 0, &canary, StatusCode::internal},  // past it
      {50, 0, nullptr, StatusCode::internal},    // no destination needed for no bytes
  };
  REQUIRE(file->read(batch).ok());
  for (const auto& r : batch) CHECK(r.result == StatusCode::ok);
  CHECK(canary == std::byte{0x5A});
  CHECK(file->read({}).ok());  // an empty batch
}

TEST_CASE("two threads read one file concurrently", "[storage][posix]") {
  k3test::TempDir dir;
  const std::size_t size = 1 << 20;
  const auto data = k3test::random_bytes(size, 4);
  const auto path = dir.path() / "shared.bin";
  k3test::write_file(path, data);
  const auto file = k3test::open_file(*k3test::posix_backend(), path.string());

  std::atomic<int> mismatches{0};
  std::atomic<int> failures{0};
  auto reader = [&](std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::uint64_t> offset(0, size - 1);
    for (int round = 0; round < 300; ++round) {
      std::vector<k3test::OwnedRequest> batch;
      for (int i = 0; i < 8; ++i) {
        const std::uint64_t off = offset(rng);
        batch.emplace_back(off, std::min<std::uint64_t>(size - off, 1 + rng() % 20000));
      }
      if (!k3test::read_batch(*file, batch).ok()) ++failures;
      for (const auto& o : batch)
        if (std::memcmp(o.buffer.data(), data.data() + o.request.offset, o.request.length) != 0) ++mismatches;
    }
  };
  std::thread a(reader, 10), b(reader, 11);
  a.join();
  b.join();
  CHECK(failures == 0);
  CHECK(mismatches == 0);
}
