// The tiered decorator beyond the shared conformance cases: its parameters, a block torn
// on disk is dropped and read again from the inner backend (never served), a block changed
// on disk after it was served is caught at the next serve (every serve checks it) and
// counted in the counters the run report shows, a file changed under the same size gets
// other blocks, a cap evicts least recently used blocks, and the directory alone rebuilds
// the index in a new backend.
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include <k3/storage_extras.hpp>

#include "conformance_support.hpp"

using k3::sdk::ReadRequest;
using k3::sdk::StatusCode;
using namespace k3test;
namespace fs = std::filesystem;

namespace {

bool has_tiered() {
  for (const auto& p : plugin_host().plugins())
    if (p.kind == k3::PluginKind::storage && p.name == "tiered") return true;
  return false;
}

std::uint64_t tier_bytes(const fs::path& dir) {
  std::uint64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".blk") n += e.file_size();
  return n;
}

std::vector<fs::path> blocks(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".blk") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

/// The backend's counter `name` (sdk::StorageCounters).
std::uint64_t counter(k3::sdk::StorageBackend& backend, const std::string& name) {
  auto* counted = dynamic_cast<k3::sdk::StorageCounters*>(&backend);
  REQUIRE(counted != nullptr);
  std::vector<std::pair<std::string, std::uint64_t>> all;
  REQUIRE(counted->counters(all).ok());
  for (const auto& [n, v] : all)
    if (n == name) return v;
  FAIL("no counter " << name);
  return 0;
}

void flip(const fs::path& file, std::streamoff at) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.get(c);
  f.seekp(at);
  f.put(static_cast<char>(c ^ 0x7f));
}

void read_all(k3::sdk::StorageFile& file, const std::vector<std::byte>& want) {
  std::vector<std::byte> got(want.size());
  ReadRequest r{0, want.size(), got.data(), StatusCode::internal};
  const auto st = file.read({&r, 1});
  INFO(st.detail);
  REQUIRE(st.ok());
  CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
}

}  // namespace

TEST_CASE("tiered: dir is required, bad numbers are refused naming the key", "[tiered]") {
  if (!has_tiered()) {
    WARN("SKIP: the tiered storage plugin is not built (no libxxhash)");
    return;
  }
  TempDir dir;
  const std::string d = (dir.path() / "t").string();
  for (const k3::PluginParams& bad : std::vector<k3::PluginParams>{{{"inner", "posix"}},
                                                                   {{"dir", d}, {"block_kb", "1"}},
                                                                   {{"dir", d}, {"max_mb", "x"}},
                                                                   {{"dir", d}, {"max_pending_mb", "0"}},
                                                                   {{"dir", d}, {"fsync", "maybe"}},
                                                                   {{"dir", d}, {"inner", "posix"}, {"bogus", "1"}}}) {
    const std::string key = bad.size() == 1 ? "dir" : bad.back().first;
    INFO(key);
    CHECK_THROWS_WITH(plugin_host().create_storage("tiered", bad), Catch::Contains(key));
  }
}

TEST_CASE("tiered: a torn block is dropped and read again, a cap evicts, a new backend finds the blocks", "[tiered]") {
  if (!has_tiered()) {
    WARN("SKIP: the tiered storage plugin is not built (no libxxhash)");
    return;
  }
  TempDir dir;
  const auto data = random_bytes(200000, 77);
  const auto path = (dir.path() / "data.bin").string();
  write_file(path, data);
  const auto tier = dir.path() / "tier";
  const k3::PluginParams params{{"inner", "posix"}, {"dir", tier.string()}, {"block_kb", "16"}};
  {
    auto backend = plugin_host().create_storage("tiered", params);
    auto file = open_file(*backend, path);
    read_all(*file, data);
  }  // the writer drains when the backend goes
  auto stored = blocks(tier);
  REQUIRE(stored.size() == 13);  // ceil(200000 / 16384)
  // One block with a flipped data byte, one truncated, one replaced by a leftover temp of a
  // dead writer: all read right, from the inner backend.
  {
    std::fstream f(stored[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
  }
  fs::resize_file(stored[1], 30);
  fs::rename(stored[2], stored[2].parent_path() / ".2.blk.tmp.999999999.1");
  {
    auto backend = plugin_host().create_storage("tiered", params);
    CHECK_FALSE(fs::exists(stored[2].parent_path() / ".2.blk.tmp.999999999.1"));  // a dead writer's: removed
    auto file = open_file(*backend, path);
    read_all(*file, data);
    read_all(*file, data);
  }
  CHECK(blocks(tier).size() == 13);  // dropped and written again
  // The data file changed under the same size: posix gives no validator, so the tier keys
  // the file by bytes sampled from it at open, and the new revision gets other blocks.
  const auto same_size = random_bytes(200000, 80);
  write_file(path, same_size);
  {
    auto backend = plugin_host().create_storage("tiered", params);
    auto file = open_file(*backend, path);
    read_all(*file, same_size);
    CHECK(counter(*backend, "tier_files_keyed_by_sample") == 1);
  }
  // A new size is another object too.
  const auto bigger = random_bytes(200001, 78);
  write_file(path, bigger);
  {
    auto backend = plugin_host().create_storage("tiered", params);
    auto file = open_file(*backend, path);
    read_all(*file, bigger);
  }
  // A 1 MiB cap over 3 MiB of reads: the tier stays under the cap.
  const auto large = random_bytes(3 << 20, 79);
  write_file(path, large);
  const auto capped = dir.path() / "capped";
  {
    auto backend = plugin_host().create_storage(
        "tiered", {{"inner", "posix"}, {"dir", capped.string()}, {"block_kb", "64"}, {"max_mb", "1"}});
    auto file = open_file(*backend, path);
    read_all(*file, large);
    read_all(*file, large);
  }
  CHECK(tier_bytes(capped) <= (1u << 20));
  CHECK(tier_bytes(capped) > 0);
}

TEST_CASE(
    "tiered: every serve checks the block, so one changed on disk after a serve is dropped, fetched again and counted",
    "[tiered]") {
  if (!has_tiered()) {
    WARN("SKIP: the tiered storage plugin is not built (no libxxhash)");
    return;
  }
  TempDir dir;
  const auto data = random_bytes(100000, 81);
  const auto path = (dir.path() / "data.bin").string();
  write_file(path, data);
  const auto tier = dir.path() / "tier";
  auto backend =
      plugin_host().create_storage("tiered", {{"inner", "posix"}, {"dir", tier.string()}, {"block_kb", "16"}});
  auto file = open_file(*backend, path);
  read_all(*file, data);  // fetched from the inner backend and queued for the tier
  // Wait for the writer: the next read must come from the tier.
  for (int i = 0; i < 500 && counter(*backend, "tier_blocks_written") < 7; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(counter(*backend, "tier_blocks_written") == 7);  // ceil(100000 / 16384)
  const std::uint64_t hits = counter(*backend, "tier_hit_bytes");
  read_all(*file, data);  // served from the tier, each block checked
  CHECK(counter(*backend, "tier_hit_bytes") == hits + data.size());
  CHECK(counter(*backend, "tier_blocks_damaged_refetched") == 0);
  // In the same process, after those serves: one data byte of a block changes on disk.
  const auto stored = blocks(tier);
  REQUIRE(stored.size() == 7);
  flip(stored[3], 56 + 1000);
  read_all(*file, data);  // the damaged block is not served: it is fetched again
  CHECK(counter(*backend, "tier_blocks_damaged_refetched") == 1);
  read_all(*file, data);  // and again: right bytes, whether rewritten yet or not
  CHECK(counter(*backend, "tier_blocks_damaged_refetched") == 1);
}
