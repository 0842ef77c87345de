// Trace files: round trip through TraceWriter/read_trace, the documented byte layout, and a
// clear error naming the file for every kind of damage.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <vector>

#include <k3/error.hpp>
#include <k3/trace.hpp>

#include "sim_test_util.hpp"

namespace {

std::vector<unsigned char> slurp(const std::filesystem::path& f) {
  std::ifstream in(f, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void spit(const std::filesystem::path& f, const std::vector<unsigned char>& bytes) {
  std::ofstream out(f, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

k3::TraceHeader small_header() {
  k3::TraceHeader h;
  h.layers = 3;
  h.experts_per_layer = 300;
  h.top_k = 2;
  h.arch_fingerprint = 0x0123456789abcdefull;
  h.prompt_hash = 0xfedcba9876543210ull;
  h.expert_bytes = 17547264;
  return h;
}

std::filesystem::path write_small(const std::filesystem::path& dir) {
  const auto file = dir / "small.k3trace";
  k3::TraceWriter w(file, small_header());
  w.add(0, 1, 7);
  w.add(0, 1, 299);
  const std::uint32_t layer2[] = {5, 6};
  w.add_layer(70000, 2, layer2);
  w.close();
  return file;
}

}  // namespace

TEST_CASE("trace: round trip keeps header and records", "[trace]") {
  const auto dir = sim_test::scratch("roundtrip");
  const auto file = write_small(dir);
  const k3::Trace t = k3::read_trace(file);
  CHECK(t.header.layers == 3);
  CHECK(t.header.experts_per_layer == 300);
  CHECK(t.header.top_k == 2);
  CHECK(t.header.arch_fingerprint == 0x0123456789abcdefull);
  CHECK(t.header.prompt_hash == 0xfedcba9876543210ull);
  CHECK(t.header.expert_bytes == 17547264);
  CHECK(t.header.record_count == 4);
  const std::vector<k3::TraceRecord> want = {{0, 1, 7}, {0, 1, 299}, {70000, 2, 5}, {70000, 2, 6}};
  CHECK(t.records == want);
  // No temporary file is left behind.
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++files;
  CHECK(files == 1);
}

TEST_CASE("trace: the byte layout is the documented one", "[trace]") {
  const auto dir = sim_test::scratch("layout");
  const auto bytes = slurp(write_small(dir));
  REQUIRE(bytes.size() == 72 + 4 * 8);
  CHECK(std::string(bytes.begin(), bytes.begin() + 8) == std::string("K3TRACE\0", 8));
  CHECK(bytes[8] == 1);    // version, little-endian u32
  CHECK(bytes[12] == 72);  // header bytes
  CHECK(bytes[16] == 3);   // layers
  CHECK((bytes[20] | bytes[21] << 8) == 300);
  CHECK(bytes[24] == 2);   // top-k
  CHECK(bytes[28] == 8);   // record bytes
  CHECK(bytes[32] == 0xef);  // fingerprint, low byte first
  CHECK(bytes[56] == 4);     // record count
  // Third record at 72 + 16: position 70000 = 0x00011170 LE, layer 2, expert 5.
  const unsigned char third[8] = {0x70, 0x11, 0x01, 0x00, 2, 0, 5, 0};
  CHECK(std::equal(third, third + 8, bytes.begin() + 72 + 16));
}

TEST_CASE("trace: damaged files are refused with the file name and the reason", "[trace]") {
  const auto dir = sim_test::scratch("damage");
  const auto good = slurp(write_small(dir));
  const auto bad = dir / "bad.k3trace";
  const auto refuse = [&](std::vector<unsigned char> bytes, const std::string& why) {
    spit(bad, bytes);
    INFO(why);
    CHECK_THROWS_AS(k3::read_trace(bad), k3::UsageError);
    CHECK_THROWS_WITH(k3::read_trace(bad), Catch::Contains(bad.string()) && Catch::Contains(why));
  };

  auto b = good;
  b[0] = 'X';
  refuse(b, "not a k3host trace");
  refuse(std::vector<unsigned char>(good.begin(), good.begin() + 40), "truncated header");
  b = good;
  b[8] = 2;
  refuse(b, "version 2");
  refuse(std::vector<unsigned char>(good.begin(), good.end() - 8), "truncated");
  refuse(std::vector<unsigned char>(good.begin(), good.end() - 3), "truncated");
  b = good;
  b.insert(b.end(), {1, 2, 3, 4, 5, 6, 7, 8});
  refuse(b, "count mismatch");
  b = good;
  b[72 + 6] ^= 1;  // expert 7 -> 6 in the first record
  refuse(b, "checksum");
  b = good;
  b[16] = 2;  // 2 layers: the records of layer 2 fall outside
  refuse(b, "outside the geometry");
  CHECK_THROWS_WITH(k3::read_trace(dir / "missing.k3trace"), Catch::Contains("missing.k3trace"));
}

TEST_CASE("trace: the writer checks geometry and leaves nothing when abandoned", "[trace]") {
  const auto dir = sim_test::scratch("writer");
  const auto file = dir / "t.k3trace";
  {
    k3::TraceWriter w(file, small_header());
    CHECK_THROWS_WITH(w.add(0, 3, 0), Catch::Contains("layer 3"));
    CHECK_THROWS_WITH(w.add(0, 0, 300), Catch::Contains("expert 300"));
    CHECK_THROWS_WITH(w.add(-1, 0, 0), Catch::Contains("position"));
    w.add(0, 0, 0);
  }  // destroyed without close(): no file at all
  CHECK(std::filesystem::is_empty(dir));
  k3::TraceHeader h = small_header();
  h.layers = 0;
  CHECK_THROWS_AS(k3::TraceWriter(file, h), k3::UsageError);
}

TEST_CASE("trace: an empty trace round-trips", "[trace]") {
  const auto dir = sim_test::scratch("empty");
  k3::Trace t;
  t.header = small_header();
  k3::write_trace(dir / "e.k3trace", t);
  const k3::Trace back = k3::read_trace(dir / "e.k3trace");
  CHECK(back.records.empty());
  CHECK(back.header.record_count == 0);
}
