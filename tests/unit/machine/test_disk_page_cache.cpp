// The disk read test and the page-cache probe on real files in the test folder: requests
// counted and sized, a file smaller than one request skipped, the temporary-file fallback
// leaving no file behind, and mincore() seeing a file just written and read.
#include <catch2/catch.hpp>

#include <fstream>
#include <random>
#include <vector>

#include <k3/error.hpp>
#include <k3/machine.hpp>

#include "machine_test_support.hpp"

using k3::test::FakeRoot;
namespace fs = std::filesystem;
namespace m = k3::machine;

namespace {

void write_random(const fs::path& file, std::size_t bytes) {
  std::vector<char> data(bytes);
  std::mt19937 rng(1);
  for (auto& c : data) c = static_cast<char>(rng());
  std::ofstream(file, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
}

std::size_t entries(const fs::path& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("disk: reads the given files at both depths, whole requests of the rounded-up size") {
  FakeRoot dir("disk-files");
  write_random(dir.path() / "a.safetensors", 4 << 20);
  write_random(dir.path() / "b.safetensors", 2 << 20);
  write_random(dir.path() / "tiny.safetensors", 1000);  // smaller than one request: skipped
  m::DiskBenchOptions o;
  o.files = {dir.path() / "a.safetensors", dir.path() / "b.safetensors", dir.path() / "tiny.safetensors"};
  o.scratch_folder = dir.path();
  o.request_bytes = 300000;  // rounds up to 303104 (74 x 4096)
  o.seconds = 0.2;
  o.depths = {1, 4};
  const m::DiskBench b = m::bench_disk(o);
  CHECK(b.request_bytes == 303104);
  REQUIRE(b.passes.size() == 2);
  CHECK(b.passes[0].depth == 1);
  CHECK(b.passes[1].depth == 4);
  for (const auto& p : b.passes) {
    CHECK(p.requests > 0);
    CHECK(p.bytes == p.requests * b.request_bytes);  // every offset leaves room for a whole request
    CHECK(p.bytes_per_second() > 0);
  }
  CHECK(b.best_bytes_per_second() > 0);
  // The files are large enough, so the only reason to read a temporary file is a file
  // system that refuses O_DIRECT (tmpfs before Linux 6.6), and the fallback says so.
  CHECK(b.temporary_file == b.direct_refused);
  if (b.temporary_file)
    CHECK(b.note.find("temporary file") != std::string::npos);
  else
    CHECK(b.note.empty());
  CHECK_FALSE(b.filesystem.empty());
}

TEST_CASE("disk: without files a temporary file is read, and nothing is left in the folder") {
  FakeRoot dir("disk-scratch");
  const std::size_t before = entries(dir.path());
  m::DiskBenchOptions o;
  o.scratch_folder = dir.path();
  o.scratch_bytes = 8 << 20;
  o.request_bytes = 1 << 20;
  o.seconds = 0.1;
  o.depths = {2};
  const m::DiskBench b = m::bench_disk(o);
  CHECK(b.temporary_file);
  CHECK_FALSE(b.direct_refused);  // no files were given: nothing refused
  CHECK(b.folder == dir.path());
  CHECK(b.note.find("temporary file") != std::string::npos);
  REQUIRE(b.passes.size() == 1);
  CHECK(b.passes[0].requests > 0);
  CHECK(entries(dir.path()) == before);
}

TEST_CASE("disk: files all smaller than one request fall back to a temporary file, not as a refusal") {
  FakeRoot dir("disk-small");
  write_random(dir.path() / "small.safetensors", 8192);
  m::DiskBenchOptions o;
  o.files = {dir.path() / "small.safetensors"};
  o.scratch_folder = dir.path();
  o.scratch_bytes = 8 << 20;
  o.request_bytes = 1 << 20;
  o.seconds = 0.05;
  o.depths = {1};
  const m::DiskBench b = m::bench_disk(o);
  CHECK(b.temporary_file);
  CHECK_FALSE(b.direct_refused);
  CHECK(b.note.find("no file is as large as one request") != std::string::npos);
}

TEST_CASE("disk: several request sizes: the files serve the sizes they hold, one temporary file the rest") {
  // As the doctor reads for two models: a small expert the shards hold, and K3's, which
  // they do not; each size gets its own passes and its share of the seconds.
  FakeRoot dir("disk-sizes");
  write_random(dir.path() / "shard.safetensors", 256 << 10);
  const std::size_t before = entries(dir.path());
  m::DiskBenchOptions o;
  o.files = {dir.path() / "shard.safetensors"};
  o.scratch_folder = dir.path();
  o.scratch_bytes = 8 << 20;
  o.seconds = 0.2;
  o.depths = {1, 2};
  const std::vector<m::DiskBench> tests = m::bench_disk(o, {8192, 3 << 20, 5000});
  REQUIRE(tests.size() == 3);
  CHECK(tests[0].request_bytes == 8192);
  CHECK(tests[1].request_bytes == (3u << 20));
  CHECK(tests[2].request_bytes == 8192);  // rounded up to 4096
  CHECK(tests[1].temporary_file);
  CHECK(tests[1].note.find("no file is as large as one request") != std::string::npos);
  // The file holds four of the largest request (span: the offsets a whole request fits at).
  CHECK(tests[1].span_bytes + tests[1].request_bytes - 4096 >= 4 * tests[1].request_bytes);
  for (const auto& t : tests) {
    CAPTURE(t.request_bytes, t.note);
    REQUIRE(t.passes.size() == 2);
    for (const auto& p : t.passes) {
      CHECK(p.requests > 0);
      CHECK(p.bytes == p.requests * t.request_bytes);
      // Each pass had a share of the seconds, but how long its last request takes is the
      // disk's: under other jobs' reads a pass ran past 0.2 s, so no time is asserted here.
      CHECK(p.seconds > 0);
    }
    if (!t.temporary_file) CHECK(t.folder == dir.path());
  }
  CHECK(entries(dir.path()) == before);
}

TEST_CASE("disk: a folder that does not exist is a RuntimeError naming it") {
  FakeRoot dir("disk-missing");
  m::DiskBenchOptions o;
  o.scratch_folder = dir.path() / "nope";
  o.seconds = 0.05;
  CHECK_THROWS_AS(m::bench_disk(o), k3::RuntimeError);
  CHECK_THROWS_WITH(m::bench_disk(o), Catch::Contains("nope"));
}

TEST_CASE("page cache: a file just written is resident, a missing one is counted unreadable") {
  FakeRoot dir("page-cache");
  write_random(dir.path() / "f.bin", 1 << 20);
  {
    std::ifstream in(dir.path() / "f.bin", std::ios::binary);
    std::vector<char> sink(1 << 20);
    in.read(sink.data(), static_cast<std::streamsize>(sink.size()));
  }
  const m::PageCacheState s = m::page_cache_state({dir.path() / "f.bin", dir.path() / "missing.bin"});
  CHECK(s.files == 2);
  CHECK(s.unreadable == 1);
  CHECK(s.bytes == (1u << 20));
  CHECK(s.resident <= s.bytes);
  CHECK(s.resident > 0);  // written and read just now
}
