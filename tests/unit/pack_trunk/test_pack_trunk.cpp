// pack-trunk on the tiny checkpoint: every packed tensor's bytes equal the checkpoint's;
// unfinished or damaged trunks, an existing OUT and a pack of another checkpoint are refused.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <catch2/catch.hpp>

#include <k3/checkpoint.hpp>
#include <k3/error.hpp>
#include <k3/model_config.hpp>
#include <k3/pack_trunk.hpp>
#include <k3/plugin_host.hpp>

#include "local_storage.hpp"
#include "test_models.hpp"

namespace fs = std::filesystem;

namespace {

k3::test::ScratchCleanup cleanup;

/// Bytes [offset, offset + n) of a file, read with plain iostreams (independent of the
/// storage plugins the packer uses).
std::vector<char> file_bytes(const fs::path& path, std::uint64_t offset, std::uint64_t n) {
  std::ifstream f(path, std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  std::vector<char> out(n);
  f.read(out.data(), static_cast<std::streamsize>(n));
  REQUIRE(static_cast<std::uint64_t>(f.gcount()) == n);
  return out;
}

std::uint64_t tiny_identity() { return k3::test::identity_of(k3::test::test_model("tiny")); }

/// A packed tiny trunk, made once per process.
const fs::path& packed_tiny() {
  static const fs::path out = [] {
    k3::PackTrunkOptions o;
    o.model = k3::test::test_model("tiny");
    o.out = k3::test::scratch_dir() / "trunk-tiny";
    o.force = true;
    return k3::pack_trunk(o).dir;
  }();
  return out;
}

void copy_trunk(const fs::path& from, const fs::path& to) {
  fs::remove_all(to);
  fs::copy(from, to, fs::copy_options::recursive);
}

}  // namespace

TEST_CASE("pack-trunk: every non-expert tensor of tiny is packed with the checkpoint's bytes", "[pack_trunk]") {
  const fs::path& model = k3::test::test_model("tiny");
  const k3::ModelConfig config = k3::test::read_config(model);
  const k3::CheckpointIndex index = k3::test::open_index(model);
  const k3::PackedTrunk trunk =
      k3::PackedTrunk::open(k3::test::local_storage(), packed_tiny().string(), tiny_identity());

  REQUIRE(trunk.layers().size() == static_cast<std::size_t>(config.num_hidden_layers));
  CHECK_FALSE(fs::exists(packed_tiny().string() + ".tmp." + std::to_string(::getpid())));

  std::set<std::string> packed;
  auto check_run = [&](const k3::PackedRun& run) {
    INFO("run " << run.name);
    CHECK(run.file_offset % 4096 == 0);
    for (const auto& t : run.tensors) {
      INFO("tensor " << t.name);
      CHECK(packed.insert(t.name).second);  // each tensor once
      CHECK(t.name.find(".block_sparse_moe.experts.") == std::string::npos);
      const k3::TensorInfo* src = index.find(t.name);
      REQUIRE(src != nullptr);
      CHECK(src->dtype == t.dtype);
      CHECK(src->shape == t.shape);
      REQUIRE(src->nbytes == t.nbytes);
      CHECK(file_bytes(index.files()[src->file].uri, src->offset, src->nbytes) ==
            file_bytes(trunk.bin_uri(), run.file_offset + t.offset, t.nbytes));
    }
  };
  for (std::size_t i = 0; i < trunk.layers().size(); ++i) {
    const auto& run = trunk.layers()[i];
    CHECK(run.layer == static_cast<std::int64_t>(i));
    for (const auto& t : run.tensors) CHECK_THAT(t.name, Catch::Contains("model.layers." + std::to_string(i) + "."));
    check_run(run);
  }
  for (const auto& run : trunk.globals()) {
    CHECK(run.tensors.size() == 1);
    check_run(run);
  }
  // Everything that is not a routed expert was packed, nothing else.
  std::set<std::string> expected;
  for (const auto& t : index.tensors())
    if (t.name.find(".block_sparse_moe.experts.") == std::string::npos) expected.insert(t.name);
  CHECK(packed == expected);
  for (const char* global : {"language_model.model.embed_tokens.weight", "language_model.model.norm.weight",
                             "language_model.model.output_attn_res_norm.weight",
                             "language_model.model.output_attn_res_proj.weight", "language_model.lm_head.weight"})
    CHECK(trunk.global(global) != nullptr);

  k3::PluginHost host;
  auto storage = host.create_storage("posix", {});
  CHECK_NOTHROW(trunk.verify_hashes(*storage));
}

TEST_CASE("pack-trunk: a damaged trunk.bin fails hash verification naming the run", "[pack_trunk]") {
  const fs::path copy = k3::test::scratch_dir() / "trunk-flipped";
  copy_trunk(packed_tiny(), copy);
  const k3::PackedTrunk trunk = k3::PackedTrunk::open(k3::test::local_storage(), copy.string(), tiny_identity());
  const auto& run = trunk.layers()[1];
  {
    std::fstream f(copy / "trunk.bin", std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(run.file_offset + run.nbytes / 2));
    char c = 0;
    f.read(&c, 1);
    f.seekp(static_cast<std::streamoff>(run.file_offset + run.nbytes / 2));
    c = static_cast<char>(c ^ 0x01);
    f.write(&c, 1);
  }
  k3::PluginHost host;
  auto storage = host.create_storage("posix", {});
  CHECK_THROWS_WITH(trunk.verify_hashes(*storage), Catch::Contains("layer 1"));
}

TEST_CASE("pack-trunk: a folder without trunk.json, or with a corrupt one, is refused clearly", "[pack_trunk]") {
  const std::uint64_t fp = tiny_identity();
  const fs::path copy = k3::test::scratch_dir() / "trunk-broken";

  copy_trunk(packed_tiny(), copy);
  fs::remove(copy / "trunk.json");
  CHECK_THROWS_WITH(k3::PackedTrunk::open(k3::test::local_storage(), copy.string(), fp),
                    Catch::Contains("no trunk.json") && Catch::Contains("interrupted"));

  copy_trunk(packed_tiny(), copy);
  fs::resize_file(copy / "trunk.json", fs::file_size(copy / "trunk.json") / 2);  // cut mid-write
  CHECK_THROWS_WITH(k3::PackedTrunk::open(k3::test::local_storage(), copy.string(), fp),
                    Catch::Contains("trunk.json") && Catch::Contains("not valid JSON"));

  copy_trunk(packed_tiny(), copy);
  fs::resize_file(copy / "trunk.bin", fs::file_size(copy / "trunk.bin") - 4096);
  CHECK_THROWS_WITH(k3::PackedTrunk::open(k3::test::local_storage(), copy.string(), fp),
                    Catch::Contains("trunk.bin") && Catch::Contains("bytes"));

  // A run pointing outside trunk.bin.
  copy_trunk(packed_tiny(), copy);
  {
    std::ifstream in(copy / "trunk.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto at = text.find("\"file_off\": 0");
    REQUIRE(at != std::string::npos);
    text.replace(at, 13, "\"file_off\": 409600000000");
    std::ofstream(copy / "trunk.json", std::ios::trunc) << text;
  }
  CHECK_THROWS_WITH(k3::PackedTrunk::open(k3::test::local_storage(), copy.string(), fp),
                    Catch::Contains("outside trunk.bin"));
}

TEST_CASE("pack-trunk: a pack of another checkpoint is refused naming both identities", "[pack_trunk]") {
  const std::uint64_t other = tiny_identity() ^ 1;
  CHECK_THROWS_WITH(k3::PackedTrunk::open(k3::test::local_storage(), packed_tiny().string(), other, "elsewhere"),
                    Catch::Contains("trunk.json") && Catch::Contains(k3::identity_hex(tiny_identity())) &&
                        Catch::Contains(k3::identity_hex(other)) && Catch::Contains("elsewhere") &&
                        Catch::Contains("pack-trunk"));
}

TEST_CASE("pack-trunk: a trunk.json of an older version is refused with the reason", "[pack_trunk]") {
  const fs::path copy = k3::test::scratch_dir() / "trunk-v2";
  copy_trunk(packed_tiny(), copy);
  std::string text;
  {
    std::ifstream in(copy / "trunk.json");
    text.assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  const auto at = text.find("\"version\": 3");
  REQUIRE(at != std::string::npos);
  text.replace(at, 12, "\"version\": 2");
  std::ofstream(copy / "trunk.json", std::ios::trunc) << text;
  CHECK_THROWS_WITH(k3::PackedTrunk::open(k3::test::local_storage(), copy.string(), tiny_identity()),
                    Catch::Contains("version 2") && Catch::Contains("identity") && Catch::Contains("repack"));
}

TEST_CASE("pack-trunk: an existing OUT is refused without --force and replaced with it", "[pack_trunk]") {
  const fs::path out = k3::test::scratch_dir() / "trunk-exists";
  fs::remove_all(out);
  k3::PackTrunkOptions o;
  o.model = k3::test::test_model("tiny");
  o.out = out;
  k3::pack_trunk(o);
  CHECK_THROWS_AS(k3::pack_trunk(o), k3::UsageError);
  CHECK_THROWS_WITH(k3::pack_trunk(o), Catch::Contains("--force"));
  o.force = true;
  std::vector<std::string> phases;
  o.progress = [&](std::string_view phase, std::uint64_t, std::uint64_t) {
    if (phases.empty() || phases.back() != phase) phases.emplace_back(phase);
  };
  const auto r = k3::pack_trunk(o);
  CHECK(phases == std::vector<std::string>{"copy", "verify"});
  CHECK(fs::exists(out / "trunk.json"));
  CHECK(fs::file_size(out / "trunk.bin") == r.bin_bytes);
  CHECK_NOTHROW(k3::PackedTrunk::open(k3::test::local_storage(), out.string(), tiny_identity()));
  for (const auto& entry : fs::directory_iterator(out.parent_path()))
    CHECK(entry.path().filename().string().find("trunk-exists.") == std::string::npos);  // no .tmp/.old left
}

TEST_CASE("pack-trunk --force replaces only a folder pack-trunk wrote", "[pack_trunk]") {
  const fs::path out = k3::test::scratch_dir() / "trunk-foreign";
  fs::create_directories(out);
  std::ofstream(out / "keep.txt") << "old";
  k3::PackTrunkOptions o;
  o.model = k3::test::test_model("tiny");
  o.out = out;
  o.force = true;
  CHECK_THROWS_WITH(k3::pack_trunk(o), Catch::Contains("not a folder pack-trunk wrote"));
  CHECK(fs::exists(out / "keep.txt"));
}

TEST_CASE("pack-trunk refuses an OUT that is the checkpoint, inside it or holds it", "[pack_trunk]") {
  // A copy of tiny, so that a failure of this test cannot damage the shared test model.
  const fs::path parent = k3::test::scratch_dir() / "overlap";
  fs::remove_all(parent);
  const fs::path model = parent / "model";
  fs::create_directories(parent);
  fs::copy(k3::test::test_model("tiny"), model, fs::copy_options::recursive);
  std::ofstream(parent / "notes.txt") << "a file beside the checkpoint";
  std::set<std::string> before;
  for (const auto& e : fs::recursive_directory_iterator(parent)) before.insert(e.path().string());
  k3::PackTrunkOptions o;
  o.model = model;
  o.force = true;
  for (const auto& [out, says] :
       std::vector<std::pair<fs::path, std::string>>{{model, "is the checkpoint folder or inside it"},
                                                     {model / ".", "is the checkpoint folder or inside it"},
                                                     {model / "packed", "is the checkpoint folder or inside it"},
                                                     {parent, "holds the checkpoint"},
                                                     {model / ".." / "..", "holds the checkpoint"}}) {
    o.out = out;
    CAPTURE(out);
    CHECK_THROWS_WITH(k3::pack_trunk(o), Catch::Contains(says));
  }
  std::set<std::string> after;
  for (const auto& e : fs::recursive_directory_iterator(parent)) after.insert(e.path().string());
  CHECK(after == before);
}

TEST_CASE("pack-trunk: a missing model is a usage error", "[pack_trunk]") {
  k3::PackTrunkOptions o;
  o.model = k3::test::scratch_dir() / "no-such-model";
  o.out = k3::test::scratch_dir() / "never";
  CHECK_THROWS_AS(k3::pack_trunk(o), k3::UsageError);
  CHECK_FALSE(fs::exists(o.out));
}
