// Trace files: round trip through TraceWriter/read_trace, the documented byte layout
// (version 3 with serving groups and the checkpoint identity; versions 1 and 2 still read),
// a clear error naming the file for every kind of damage, and the refusal of a trace of
// another run (geometry, architecture, checkpoint, prompt).
#include <catch2/catch.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

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
/// Rewrites the header checksum after a test edited the records on purpose (records start
/// at `header`: 80, or 72 in versions 1 and 2).
void reseal(std::vector<unsigned char>& b, std::size_t header = 80) {
  const std::uint64_t h = XXH64(b.data() + header, b.size() - header, 0);
  for (int i = 0; i < 8; ++i) b[static_cast<std::size_t>(64 + i)] = static_cast<unsigned char>(h >> (8 * i));
}

k3::TraceHeader small_header() {
  k3::TraceHeader h;
  h.layers = 3;
  h.experts_per_layer = 300;
  h.top_k = 2;
  h.arch_fingerprint = 0x0123456789abcdefull;
  h.prompt_hash = 0xfedcba9876543210ull;
  h.expert_bytes = 17547264;
  h.checkpoint_identity = 0x1122334455667788ull;
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
  CHECK(t.header.checkpoint_identity == 0x1122334455667788ull);
  // Groups: the first record, and the first of another layer.
  const std::vector<k3::TraceRecord> want = {{0, 1, 7, true},
                                             {0, 1, 299, false},
                                             {70000, 2, 5, true},
                                             {70000, 2, 6, false}};
  CHECK(t.records == want);
  // No temporary file is left behind.
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++files;
  CHECK(files == 1);
}

TEST_CASE("trace: the byte layout is the documented one", "[trace]") {
  const auto dir = sim_test::scratch("layout");
  const auto bytes = slurp(write_small(dir));
  REQUIRE(bytes.size() == 80 + 4 * 8);
  CHECK(std::string(bytes.begin(), bytes.begin() + 8) == std::string("K3TRACE\0", 8));
  CHECK(bytes[8] == 3);    // version, little-endian u32
  CHECK(bytes[12] == 80);  // header bytes
  CHECK(bytes[16] == 3);   // layers
  CHECK((bytes[20] | bytes[21] << 8) == 300);
  CHECK(bytes[24] == 2);     // top-k
  CHECK(bytes[28] == 8);     // record bytes
  CHECK(bytes[32] == 0xef);  // fingerprint, low byte first
  CHECK(bytes[56] == 4);     // record count
  CHECK(bytes[72] == 0x88);  // checkpoint identity, low byte first
  CHECK(bytes[79] == 0x11);
  // Records: position word (bit 31 = starts a group), layer, expert, all LE. The first
  // record starts a group: position 0 | 0x80000000; the second does not.
  const unsigned char first[8] = {0, 0, 0, 0x80, 1, 0, 7, 0};
  const unsigned char second[8] = {0, 0, 0, 0, 1, 0, 0x2b, 0x01};
  CHECK(std::equal(first, first + 8, bytes.begin() + 80));
  CHECK(std::equal(second, second + 8, bytes.begin() + 80 + 8));
  // Third record at 80 + 16 starts a group (layer 2): position 70000 = 0x00011170 | bit 31.
  const unsigned char third[8] = {0x70, 0x11, 0x01, 0x80, 2, 0, 5, 0};
  CHECK(std::equal(third, third + 8, bytes.begin() + 80 + 16));
}

TEST_CASE("trace: serving groups are recorded where begin_group says", "[trace]") {
  const auto dir = sim_test::scratch("groups");
  const auto file = dir / "g.k3trace";
  {
    // A chunk of two tokens at layer 1 (one group), then two one-token groups at layer 1.
    k3::TraceWriter w(file, small_header());
    const std::uint32_t a[] = {3, 4}, b[] = {4, 5}, c[] = {6, 7}, d[] = {8, 9};
    w.begin_group();
    w.add_layer(10, 1, a);
    w.add_layer(11, 1, b);
    w.begin_group();
    w.add_layer(12, 1, c);
    w.begin_group();
    w.add_layer(13, 1, d);
    w.close();
  }
  const k3::Trace t = k3::read_trace(file);
  REQUIRE(t.records.size() == 8);
  const bool starts[8] = {true, false, false, false, true, false, true, false};
  for (std::size_t i = 0; i < 8; ++i) {
    CAPTURE(i);
    CHECK(t.records[i].starts_group == starts[i]);
  }
  CHECK(t.records[2].position == 11);  // the group bit never leaks into the position
  CHECK(t.records[4].position == 12);
  // write_trace keeps the groups.
  k3::write_trace(dir / "copy.k3trace", t);
  CHECK(k3::read_trace(dir / "copy.k3trace").records == t.records);
}

/// The version-2 form of a version-3 file: the 72-byte header without the identity.
std::vector<unsigned char> as_version_2(std::vector<unsigned char> b) {
  b.erase(b.begin() + 72, b.begin() + 80);
  b[8] = 2;
  b[12] = 72;
  reseal(b, 72);
  return b;
}

TEST_CASE("trace: version 2 files are read, without a checkpoint identity", "[trace]") {
  const auto dir = sim_test::scratch("v2");
  spit(dir / "v2.k3trace", as_version_2(slurp(write_small(dir))));
  const k3::Trace t = k3::read_trace(dir / "v2.k3trace");
  CHECK(t.header.checkpoint_identity == 0);
  CHECK(t.records == k3::read_trace(dir / "small.k3trace").records);
}

TEST_CASE("trace: version 1 files are read, grouped by token and layer", "[trace]") {
  const auto dir = sim_test::scratch("v1");
  auto b = as_version_2(slurp(write_small(dir)));
  // A version-1 file: no group bit, the position word is the position.
  b[8] = 1;
  b[72 + 3] = 0;
  b[72 + 16 + 3] = 0;
  // Make record 1 another position than record 0: (0,1,7) (5,1,299) (70000,2,5) (70000,2,6).
  b[72 + 8] = 5;
  reseal(b, 72);
  spit(dir / "v1.k3trace", b);
  const k3::Trace t = k3::read_trace(dir / "v1.k3trace");
  const std::vector<k3::TraceRecord> want = {{0, 1, 7, true},
                                             {5, 1, 299, true},
                                             {70000, 2, 5, true},
                                             {70000, 2, 6, false}};
  CHECK(t.records == want);
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
  b[8] = 4;
  refuse(b, "version 4");
  b = good;
  b[12] = 72;  // a version-3 file says the version-2 header size
  refuse(b, "80");
  b = good;
  b[8] = 0;
  refuse(b, "version 0");
  b = good;
  b[80 + 3] = 0;  // the first record does not start a group
  reseal(b);
  refuse(b, "does not start a serving group");
  b = good;
  b[80 + 16 + 3] = 0;  // the layer-2 records join the layer-1 group
  reseal(b);
  refuse(b, "joins a serving group of layer 1");
  refuse(std::vector<unsigned char>(good.begin(), good.end() - 8), "truncated");
  refuse(std::vector<unsigned char>(good.begin(), good.end() - 3), "truncated");
  b = good;
  b.insert(b.end(), {1, 2, 3, 4, 5, 6, 7, 8});
  refuse(b, "count mismatch");
  b = good;
  b[80 + 6] ^= 1;  // expert 7 -> 6 in the first record
  refuse(b, "checksum");
  b = good;
  b[16] = 2;  // 2 layers: the records of layer 2 fall outside
  refuse(b, "outside the geometry");
  for (const std::uint32_t top_k : {0u, 0xFFFFFFFFu}) {
    b = good;
    for (int k = 0; k < 4; ++k) b[24 + k] = static_cast<unsigned char>(top_k >> (8 * k));
    refuse(b, "top-" + std::to_string(top_k) + " of");
  }
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
    CHECK_THROWS_WITH(w.add(std::int64_t{1} << 31, 0, 0), Catch::Contains("position 2147483648"));
    CHECK_NOTHROW(w.add(k3::kTraceMaxPosition, 0, 0));
    w.add(0, 0, 0);
  }  // destroyed without close(): no file at all
  CHECK(std::filesystem::is_empty(dir));
  k3::TraceHeader h = small_header();
  h.layers = 0;
  CHECK_THROWS_AS(k3::TraceWriter(file, h), k3::UsageError);
}

TEST_CASE("trace: read_trace_header and the checks against a run", "[trace]") {
  const auto dir = sim_test::scratch("identity");
  const auto file = write_small(dir);
  const k3::TraceHeader h = k3::read_trace_header(file);
  CHECK(h.record_count == 4);
  CHECK(h.prompt_hash == 0xfedcba9876543210ull);
  CHECK_NOTHROW(k3::require_trace_of_run(file, h, small_header(), true));
  const auto refused = [&](k3::TraceHeader run, bool prompt, const std::string& what) {
    INFO(what);
    CHECK_THROWS_AS(k3::require_trace_of_run(file, h, run, prompt), k3::UsageError);
    CHECK_THROWS_WITH(k3::require_trace_of_run(file, h, run, prompt),
                      Catch::Contains(file.string()) && Catch::Contains(what));
  };
  k3::TraceHeader run = small_header();
  run.layers = 4;
  refused(run, false, "3 layers, this run has 4");
  run = small_header();
  run.experts_per_layer = 16;
  refused(run, false, "300 experts per layer, this run has 16");
  run = small_header();
  run.top_k = 4;
  refused(run, false, "top-2, this run has top-4");
  run = small_header();
  run.arch_fingerprint = 1;
  refused(run, false, "architecture fingerprint 0123456789abcdef, this run has 0000000000000001");
  // The same architecture, other weights (a fine-tune, a revision): another checkpoint.
  run = small_header();
  run.checkpoint_identity = 0x99;
  refused(run, false, "checkpoint identity 1122334455667788, this run has 0000000000000099");
  // A run that knows its checkpoint refuses a trace that records none (version 2, generated).
  k3::TraceHeader none = h;
  none.checkpoint_identity = 0;
  CHECK_THROWS_WITH(k3::require_trace_of_run(file, none, small_header(), false),
                    Catch::Contains(file.string()) && Catch::Contains("no checkpoint identity"));
  // A run without one (k3host sim replaying a generated trace) needs none.
  run = small_header();
  run.checkpoint_identity = 0;
  CHECK_NOTHROW(k3::require_trace_of_run(file, none, run, false));
  run = small_header();
  run.prompt_hash = 2;
  refused(run, true, "another prompt");
  CHECK_NOTHROW(k3::require_trace_of_run(file, h, run, false));  // the prompt only when asked
  CHECK_THROWS_WITH(k3::read_trace_header(dir / "missing.k3trace"), Catch::Contains("missing.k3trace"));
}

TEST_CASE("trace: the prompt hash is XXH64 of the ids as little-endian u32", "[trace]") {
  const std::uint32_t ids[] = {3, 14, 0x01020304};
  const unsigned char le[] = {3, 0, 0, 0, 14, 0, 0, 0, 4, 3, 2, 1};
  CHECK(k3::trace_prompt_hash(ids) == XXH64(le, sizeof le, 0));
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
