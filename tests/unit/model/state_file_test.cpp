// State files (core/src/engine/session_impl.hpp): the pending ids (fed by the next run)
// survive a save and a load; files of another format version, and pending ids that do not
// fit, are refused with a message that says why.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <vector>

#include <k3/error.hpp>
#include <k3/model.hpp>

#include "engine/session_impl.hpp"
#include "test_models.hpp"

namespace {

k3::test::ScratchCleanup cleanup;

k3::ModelSettings scalar() {
  k3::ModelSettings s;
  s.kernels = "scalar";
  s.threads = 1;
  return s;
}

std::vector<char> read_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const std::filesystem::path& file, const std::vector<char>& bytes) {
  std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// A copy of `file` with the header's format version (u32 at offset 8) replaced. The
/// checksum covers the payload only, so only the version differs.
std::filesystem::path with_version(const std::filesystem::path& file, std::uint32_t version) {
  std::vector<char> bytes = read_bytes(file);
  REQUIRE(bytes.size() > 12);
  std::memcpy(bytes.data() + 8, &version, sizeof version);
  const auto out = k3::test::scratch_dir() / ("v" + std::to_string(version) + ".k3state");
  write_bytes(out, bytes);
  return out;
}

}  // namespace

TEST_CASE("pending ids survive a save and a load", "[model][state]") {
  k3::PluginHost host;
  k3::Model m(k3::test::test_model("tiny"), host, scalar());
  const auto file = k3::test::scratch_dir() / "pending.k3state";
  const std::vector<std::uint32_t> fed = {9, 8, 7, 6, 5};
  const std::vector<std::uint32_t> pending = {4, 300, 2};
  {
    k3::Session s(m, 64);
    std::vector<float> logits;
    s.feed(fed, false, logits);
    s.set_pending(pending);
    s.save(file);
  }
  k3::Session t(m, 64);
  t.load(file);
  CHECK(t.tokens() == fed);
  CHECK(t.position() == static_cast<std::int64_t>(fed.size()));
  CHECK(t.pending() == pending);

  // The file says so in its header: this build's version, read back as written.
  const std::vector<char> bytes = read_bytes(file);
  std::uint32_t version = 0;
  std::memcpy(&version, bytes.data() + 8, sizeof version);
  CHECK(version == k3::engine::kStateVersion);

  SECTION("an empty pending list round-trips too") {
    t.set_pending({});
    t.save(file);
    k3::Session u(m, 64);
    u.load(file);
    CHECK(u.pending().empty());
    CHECK(u.tokens() == fed);
  }
  SECTION("reset forgets the pending ids") {
    t.reset();
    CHECK(t.pending().empty());
    CHECK(t.position() == 0);
  }
}

TEST_CASE("state files of another format version are refused, naming both versions", "[model][state][errors]") {
  k3::PluginHost host;
  k3::Model m(k3::test::test_model("tiny"), host, scalar());
  const auto file = k3::test::scratch_dir() / "current.k3state";
  {
    k3::Session s(m, 64);
    std::vector<float> logits;
    s.feed(std::vector<std::uint32_t>{1, 2, 3}, false, logits);
    s.set_pending({4});
    s.save(file);
  }
  REQUIRE(k3::engine::kStateVersion > 1);
  const std::string current = "version " + std::to_string(k3::engine::kStateVersion);
  k3::Session s(m, 64);
  const auto v1 = with_version(file, 1);
  CHECK_THROWS_AS(s.load(v1), k3::UsageError);
  CHECK_THROWS_WITH(s.load(v1), Catch::Contains(v1.string()) && Catch::Contains("version 1") &&
                                    Catch::Contains(current) && Catch::Contains("last generated token"));
  // Version 2 records no checkpoint identity: which weights computed it cannot be shown.
  const auto v2 = with_version(file, 2);
  CHECK_THROWS_WITH(s.load(v2), Catch::Contains(v2.string()) && Catch::Contains("version 2") &&
                                    Catch::Contains(current) && Catch::Contains("checkpoint"));
  const auto future = with_version(file, k3::engine::kStateVersion + 1);
  CHECK_THROWS_WITH(s.load(future), Catch::Contains(future.string()) &&
                                        Catch::Contains("version " + std::to_string(k3::engine::kStateVersion + 1)) &&
                                        Catch::Contains(current));
  // Nothing of a refused file was taken.
  CHECK(s.position() == 0);
  CHECK(s.pending().empty());
}

TEST_CASE("pending ids outside the vocabulary or the context are refused", "[model][state][errors]") {
  k3::PluginHost host;
  k3::Model m(k3::test::test_model("tiny"), host, scalar());
  const auto vocab = static_cast<std::uint32_t>(m.config().vocab_size);
  k3::Session s(m, 8);
  CHECK_THROWS_WITH(s.set_pending({1, vocab}), Catch::Contains("outside the vocabulary"));
  CHECK(s.pending().empty());

  // 5 ids fed and 4 pending do not fit a context of 8: refused when loaded, naming the file.
  const auto file = k3::test::scratch_dir() / "long.k3state";
  std::vector<float> logits;
  s.feed(std::vector<std::uint32_t>{1, 2, 3, 4, 5}, false, logits);
  s.set_pending({6, 7, 8, 9});
  s.save(file);
  k3::Session small(m, 8);
  CHECK_THROWS_WITH(small.load(file), Catch::Contains(file.string()) && Catch::Contains("9 tokens"));
  k3::Session roomy(m, 9);
  roomy.load(file);
  CHECK(roomy.pending().size() == 4);
}

TEST_CASE("an unsound state is refused naming why unless accepted, and stays unsound", "[model][state][errors]") {
  k3::PluginHost host;
  k3::Model m(k3::test::test_model("tiny"), host, scalar());
  const auto sound = k3::test::scratch_dir() / "sound.k3state";
  const auto unsound = k3::test::scratch_dir() / "unsound.k3state";
  const auto again = k3::test::scratch_dir() / "again.k3state";
  const std::vector<std::uint32_t> fed = {3, 1, 4, 1, 5};
  {
    k3::Session s(m, 64);
    std::vector<float> logits;
    s.feed(fed, false, logits);
    s.save(sound);
    s.save(unsound, "layer 2 expert 5: read failed");
  }
  // The flag is in the header (bit 0 of the u32 at offset 12).
  auto flags_of = [](const std::filesystem::path& f) {
    const std::vector<char> bytes = read_bytes(f);
    std::uint32_t flags = 0;
    std::memcpy(&flags, bytes.data() + 12, sizeof flags);
    return flags;
  };
  CHECK(flags_of(sound) == 0);
  CHECK(flags_of(unsound) == 1);

  k3::Session s(m, 64);
  CHECK_NOTHROW(s.load(sound));
  CHECK_THROWS_WITH(s.load(unsound), Catch::Contains(unsound.string()) && Catch::Contains("unsound") &&
                                         Catch::Contains("layer 2 expert 5: read failed"));
  k3::Session t(m, 64);
  t.load(unsound, /*accept_unsound=*/true);
  CHECK(t.tokens() == fed);
  t.save(again);  // no new reason: the loaded one is kept
  CHECK(flags_of(again) == 1);
  k3::Session u(m, 64);
  CHECK_THROWS_WITH(u.load(again), Catch::Contains("layer 2 expert 5: read failed"));
  t.reset();  // a fresh conversation is sound again
  t.save(again);
  CHECK(flags_of(again) == 0);
}

TEST_CASE("a folder or unknown header flags where a state file should be are refused", "[model][state][errors]") {
  k3::PluginHost host;
  k3::Model m(k3::test::test_model("tiny"), host, scalar());
  k3::Session s(m, 64);
  const auto folder = k3::test::scratch_dir() / "a-folder.k3state";
  std::filesystem::create_directories(folder);
  CHECK_THROWS_AS(s.load(folder), k3::UsageError);
  CHECK_THROWS_WITH(s.load(folder), Catch::Contains(folder.string()) && Catch::Contains("a folder"));

  const auto file = k3::test::scratch_dir() / "flags.k3state";
  s.save(file);
  std::vector<char> bytes = read_bytes(file);
  const std::uint32_t flags = 6;
  std::memcpy(bytes.data() + 12, &flags, sizeof flags);
  write_bytes(file, bytes);
  CHECK_THROWS_WITH(s.load(file), Catch::Contains("unknown flags 6"));
}
