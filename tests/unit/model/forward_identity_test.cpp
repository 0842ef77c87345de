// The bit-identity gates of docs/model-spec.md §5 on the forward pass: chunked prefill, incremental
// decode, full recompute, save→resume, thread counts and kernel sets all give the same
// logits bits. The PyTorch oracle (tests/cmake/oracle.cmake) checks the values themselves.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <vector>

#include <k3/error.hpp>
#include <k3/model.hpp>
#include <k3/plugin_host.hpp>

#include "test_models.hpp"

namespace {

using k3::test::test_model;

k3::test::ScratchCleanup cleanup;

std::vector<std::uint32_t> prompt_ids(const k3::ModelConfig& c, std::size_t n) {
  std::vector<std::uint32_t> ids;
  std::uint64_t x = 12345;
  for (std::size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    ids.push_back(static_cast<std::uint32_t>((x >> 33) % static_cast<std::uint64_t>(c.vocab_size)));
  }
  return ids;
}

/// Logits of every position, feeding `chunk` tokens at a time.
std::vector<float> logits_by_chunks(k3::Model& m, const std::vector<std::uint32_t>& ids, std::size_t chunk) {
  k3::Session s(m, 256);
  std::vector<float> all, part;
  for (std::size_t at = 0; at < ids.size(); at += chunk) {
    const std::size_t n = std::min(chunk, ids.size() - at);
    s.feed({ids.data() + at, n}, true, part);
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

k3::ModelSettings settings(const std::string& kernels, int threads) {
  k3::ModelSettings s;
  s.kernels = kernels;
  s.threads = threads;
  s.min_parallel_work = 0;  // every product and per-sequence item split over the threads
  return s;
}

}  // namespace

TEST_CASE("chunked prefill gives the same logits bits as one token at a time", "[model][identity]") {
  k3::PluginHost host;
  k3::Model m(test_model("tiny"), host, settings("scalar", 1));
  const auto ids = prompt_ids(m.config(), 23);
  const auto ref = logits_by_chunks(m, ids, 1);
  REQUIRE(ref.size() == ids.size() * static_cast<std::size_t>(m.config().vocab_size));
  for (std::size_t chunk : {2u, 3u, 7u, 23u}) {
    INFO("chunk " << chunk);
    CHECK(same_bits(logits_by_chunks(m, ids, chunk), ref));
  }
  // The logits are not degenerate (a model that outputs constants would pass the above).
  std::size_t distinct_argmax = 0;
  const auto V = static_cast<std::size_t>(m.config().vocab_size);
  std::vector<std::size_t> seen;
  for (std::size_t p = 0; p < ids.size(); ++p) {
    const float* row = ref.data() + p * V;
    const auto best = static_cast<std::size_t>(std::max_element(row, row + V) - row);
    if (std::find(seen.begin(), seen.end(), best) == seen.end()) seen.push_back(best), ++distinct_argmax;
  }
  CHECK(distinct_argmax > 1);
}

TEST_CASE("full recompute of every prefix equals incremental decode", "[model][identity]") {
  k3::PluginHost host;
  k3::Model m(test_model("tiny"), host, settings("scalar", 1));
  const auto ids = prompt_ids(m.config(), 12);
  const auto ref = logits_by_chunks(m, ids, 1);
  const auto V = static_cast<std::size_t>(m.config().vocab_size);
  for (std::size_t n = 1; n <= ids.size(); ++n) {
    k3::Session s(m, 64);
    std::vector<float> last;
    s.feed({ids.data(), n}, false, last);
    INFO("prefix " << n);
    REQUIRE(last.size() == V);
    CHECK(std::memcmp(last.data(), ref.data() + (n - 1) * V, V * sizeof(float)) == 0);
  }
}

TEST_CASE("save then resume continues bit for bit", "[model][identity][state]") {
  k3::PluginHost host;
  k3::Model m(test_model("tiny"), host, settings("scalar", 1));
  const auto ids = prompt_ids(m.config(), 16);
  const auto ref = logits_by_chunks(m, ids, 1);
  const auto V = static_cast<std::size_t>(m.config().vocab_size);
  const auto file = k3::test::scratch_dir() / "conversation.k3state";
  {
    k3::Session s(m, 64);
    std::vector<float> out;
    s.feed({ids.data(), 9}, false, out);
    s.save(file);
  }
  k3::Session resumed(m, 64);
  resumed.load(file);
  CHECK(resumed.position() == 9);
  CHECK(resumed.tokens() == std::vector<std::uint32_t>(ids.begin(), ids.begin() + 9));
  std::vector<float> out;
  resumed.feed({ids.data() + 9, ids.size() - 9}, true, out);
  CHECK(std::memcmp(out.data(), ref.data() + 9 * V, (ids.size() - 9) * V * sizeof(float)) == 0);

  SECTION("a corrupt state file is refused") {
    std::vector<char> bytes;
    {
      std::ifstream in(file, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    bytes[bytes.size() / 2] ^= 0x5a;
    const auto bad = k3::test::scratch_dir() / "corrupt.k3state";
    std::ofstream(bad, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    k3::Session s(m, 64);
    CHECK_THROWS_WITH(s.load(bad), Catch::Contains("checksum"));
  }
  SECTION("a truncated state file is refused") {
    const auto cut = k3::test::scratch_dir() / "cut.k3state";
    std::filesystem::copy_file(file, cut, std::filesystem::copy_options::overwrite_existing);
    std::filesystem::resize_file(cut, std::filesystem::file_size(file) - 7);
    k3::Session s(m, 64);
    CHECK_THROWS_WITH(s.load(cut), Catch::Contains("truncated"));
  }
  SECTION("another model's state is refused") {
    k3::Model other(test_model("tiny2"), host, settings("scalar", 1));
    k3::Session s(other, 64);
    CHECK_THROWS_WITH(s.load(file), Catch::Contains("different model architecture"));
  }
}

TEST_CASE("thread counts 1 and 2 give identical logits", "[model][identity][threads]") {
  k3::PluginHost host;
  k3::Model one(test_model("tiny"), host, settings("scalar", 1));
  k3::Model two(test_model("tiny"), host, settings("scalar", 2));
  const auto ids = prompt_ids(one.config(), 10);
  CHECK(same_bits(logits_by_chunks(one, ids, 4), logits_by_chunks(two, ids, 4)));
}

TEST_CASE("every kernel set that runs here gives the scalar logits", "[model][identity][kernels]") {
  k3::PluginHost host;
  k3::Model scalar(test_model("tiny"), host, settings("scalar", 2));
  const auto ids = prompt_ids(scalar.config(), 10);
  const auto ref = logits_by_chunks(scalar, ids, 3);
  std::size_t compared = 0;
  for (const auto& p : host.plugins()) {
    if (p.kind != k3::PluginKind::kernels || p.name == "scalar" || p.score <= 0) continue;
    INFO("kernel set " << p.name);
    k3::Model m(test_model("tiny"), host, settings(p.name, 2));
    CHECK(same_bits(logits_by_chunks(m, ids, 3), ref));
    ++compared;
  }
  if (compared == 0) WARN("SKIP: no kernel set other than scalar runs on this machine");
}

TEST_CASE("bad token ids and context overflow are refused before any compute", "[model][errors]") {
  k3::PluginHost host;
  k3::Model m(test_model("tiny"), host, settings("scalar", 1));
  k3::Session s(m, 4);
  std::vector<float> out;
  const std::vector<std::uint32_t> bad = {1, static_cast<std::uint32_t>(m.config().vocab_size)};
  CHECK_THROWS_AS(s.feed(bad, false, out), k3::UsageError);
  CHECK(s.position() == 0);
  const std::vector<std::uint32_t> five = {1, 2, 3, 4, 5};
  CHECK_THROWS_WITH(s.feed(five, false, out), Catch::Contains("context"));
  CHECK(s.position() == 0);
}
