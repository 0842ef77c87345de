// pack-trunk --codec bf16-zstd (and bf16-huff): the coded trunk decodes to the checkpoint's
// bytes, the model gives bit-identical logits from it as from the shards and
// from an uncoded pack (tiny, the shipped fortune model; resident, streamed, split),
// and damage — a flipped byte, a truncated trunk.bin, a bad length or codec in trunk.json —
// is refused naming the file and the layer. The CLI's --codec is checked too.
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <k3/checkpoint.hpp>
#include <k3/error.hpp>
#include <k3/model.hpp>
#include <k3/model_config.hpp>
#include <k3/pack_trunk.hpp>
#include <k3/plugin_host.hpp>

#include "local_storage.hpp"
#include "streaming/layer_loader.hpp"
#include "streaming/tensor_reader.hpp"
#include "test_models.hpp"

namespace fs = std::filesystem;

namespace {

k3::test::ScratchCleanup cleanup;

fs::path fortune_model() { return fs::path(K3_SOURCE_DIR) / "data" / "models" / "fortune"; }

fs::path pack(const fs::path& model, const std::string& name, const std::string& codec) {
  k3::PackTrunkOptions o;
  o.model = model;
  o.out = k3::test::scratch_dir() / ("coded-" + name + "-" + codec);
  o.force = true;
  o.codec = codec;
  return k3::pack_trunk(o).dir;
}

std::vector<float> prompt_logits(const fs::path& dir, k3::PluginHost& host, const k3::ModelSettings& s) {
  k3::Model model(dir, host, s);
  k3::Session session(model, 32);
  const std::uint32_t prompt[] = {1, 7, 42, 3, 99};
  std::vector<float> logits, all;
  session.feed({prompt, 3}, true, logits);
  all = logits;
  session.feed({prompt + 3, 2}, true, logits);
  all.insert(all.end(), logits.begin(), logits.end());
  for (int i = 0; i < 2; ++i) {
    const std::uint32_t next = static_cast<std::uint32_t>(i + 11);
    session.feed({&next, 1}, false, logits);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

void flip_byte(const fs::path& file, std::uint64_t offset) {
  std::fstream f(file, std::ios::binary | std::ios::in | std::ios::out);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  f.seekp(static_cast<std::streamoff>(offset));
  c = static_cast<char>(c ^ 0x04);
  f.write(&c, 1);
}

fs::path copy_of(const fs::path& from, const std::string& name) {
  const fs::path to = k3::test::scratch_dir() / name;
  fs::remove_all(to);
  fs::copy(from, to, fs::copy_options::recursive);
  return to;
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream f(p);
  return nlohmann::json::parse(f);
}

void write_json(const fs::path& p, const nlohmann::json& j) { std::ofstream(p) << j.dump(1); }

/// Runs k3host with `args`; returns its exit status and stdout+stderr.
std::pair<int, std::string> k3host(const std::string& args) {
  const std::string cmd = std::string(K3_HOST_EXE) + " " + args + " 2>&1";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace

TEST_CASE("coded trunk: trunk.json says the codec, the runs shrink, and every run decodes to its hash",
          "[pack_trunk][codec]") {
  const fs::path model = k3::test::test_model("demo");
  const fs::path coded = pack(model, "demo", "bf16-zstd");
  const fs::path raw = pack(model, "demo", "none");
  const nlohmann::json j = read_json(coded / "trunk.json");
  CHECK(j["version"] == 3);
  CHECK(j["codec"] == "bf16-zstd");
  CHECK(read_json(raw / "trunk.json")["version"] == 3);
  CHECK(read_json(raw / "trunk.json")["codec"] == "none");
  const auto fp = k3::test::identity_of(model);
  const k3::PackedTrunk c = k3::PackedTrunk::open(k3::test::local_storage(), coded.string(), fp);
  const k3::PackedTrunk r = k3::PackedTrunk::open(k3::test::local_storage(), raw.string(), fp);
  CHECK(c.codec() == "bf16-zstd");
  CHECK(r.codec() == "none");
  REQUIRE(c.layers().size() == r.layers().size());
  for (std::size_t i = 0; i < c.layers().size(); ++i) {
    CAPTURE(i);
    CHECK(c.layers()[i].coded());
    CHECK(c.layers()[i].nbytes == r.layers()[i].nbytes);
    REQUIRE(c.layers()[i].tensors.size() == r.layers()[i].tensors.size());
    for (std::size_t k = 0; k < c.layers()[i].tensors.size(); ++k)  // decodes to the uncoded bytes
      CHECK(c.layers()[i].tensors[k].xxh3 == r.layers()[i].tensors[k].xxh3);
    CHECK(c.layers()[i].coded_bytes < c.layers()[i].nbytes);
  }
  for (const auto& g : c.globals()) CHECK_FALSE(g.coded());  // read in pieces: stay raw
  CHECK(c.bin_bytes() < r.bin_bytes());
  k3::PluginHost host;
  auto storage = host.create_storage("posix", {});
  CHECK_NOTHROW(c.verify_hashes(*storage));
  // bf16-huff: the same layout, its own name.
  const fs::path huff = pack(model, "demo", "bf16-huff");
  const k3::PackedTrunk h = k3::PackedTrunk::open(k3::test::local_storage(), huff.string(), fp);
  CHECK(h.codec() == "bf16-huff");
  for (std::size_t i = 0; i < h.layers().size(); ++i)
    for (std::size_t k = 0; k < h.layers()[i].tensors.size(); ++k)
      CHECK(h.layers()[i].tensors[k].xxh3 == r.layers()[i].tensors[k].xxh3);
  CHECK(h.bin_bytes() < r.bin_bytes());
  CHECK_NOTHROW(h.verify_hashes(*storage));
}

TEST_CASE("coded trunk: a layer decodes from its coded run to the shards' bytes", "[pack_trunk][codec]") {
  const fs::path model_dir = k3::test::test_model("demo");
  const fs::path coded = pack(model_dir, "demo", "bf16-zstd");
  const k3::ModelConfig c = k3::test::read_config(model_dir);
  const k3::CheckpointIndex index = k3::test::open_index(model_dir);
  const k3::PackedTrunk trunk =
      k3::PackedTrunk::open(k3::test::local_storage(), coded.string(), k3::test::identity_of(model_dir));
  const k3::streaming::PackedLocations where = k3::streaming::PackedLocations::of(trunk);
  k3::PluginHost host;
  auto storage = host.create_storage("posix", {});
  k3::streaming::TensorReader plain_reader(index, *storage);
  k3::streaming::TensorReader coded_reader(index, *storage, &where);
  for (std::size_t li = 0; li < static_cast<std::size_t>(c.num_hidden_layers); ++li) {
    CAPTURE(li);
    for (const bool without_ffn : {false, true}) {
      k3::streaming::LayerLoader plain(c, plain_reader), packed(c, coded_reader);
      const std::uint64_t n_plain = plain.queue(li, false, without_ffn);
      const std::uint64_t n_coded = packed.queue(li, false, without_ffn);
      if (!without_ffn) CHECK(n_coded == trunk.layers()[li].nbytes);
      k3::AlignedBuffer a(n_plain), b(n_coded);
      k3::maths::LayerWeights wa, wb;
      const std::uint64_t coded_before = coded_reader.coded_bytes_read(), read_before = coded_reader.bytes_read();
      packed.read_and_bind(b.data(), wb);
      if (!without_ffn) {
        CHECK(coded_reader.coded_bytes_read() - coded_before == trunk.layers()[li].coded_bytes);
        // bytes_read() (the stream counters' trunk bytes) counts the coded bytes, without the padding.
        CHECK(coded_reader.bytes_read() - read_before <= trunk.layers()[li].coded_bytes);
        CHECK(coded_reader.bytes_read() - read_before + 64 * trunk.layers()[li].tensors.size() >
              trunk.layers()[li].coded_bytes);
      }
      plain.read_and_bind(a.data(), wa);
      auto same = [](const k3::maths::Matrix& x, const k3::maths::Matrix& y) {
        return x.rows == y.rows && x.cols == y.cols && x.f32 == y.f32 &&
               std::memcmp(x.w, y.w, x.rows * x.cols * x.element_bytes()) == 0;
      };
      CHECK(std::memcmp(wa.input_layernorm.data(), wb.input_layernorm.data(), wa.input_layernorm.size() * 4) == 0);
      if (wa.dense && !without_ffn) {
        CHECK(same(wa.dense_w.gate_proj, wb.dense_w.gate_proj));
        CHECK(same(wa.dense_w.up_proj, wb.dense_w.up_proj));
        CHECK(same(wa.dense_w.down_proj, wb.dense_w.down_proj));
      } else if (!wa.dense) {
        CHECK(same(wa.moe.gate, wb.moe.gate));
        CHECK(same(wa.moe.shared_down, wb.moe.shared_down));
      }
      if (wa.mla)
        CHECK(same(wa.mla_w.o_proj, wb.mla_w.o_proj));
      else
        CHECK(same(wa.kda.q_proj, wb.kda.q_proj));
    }
  }
  // The whole decoded layer equals the uncoded run byte for byte, padding included.
  const fs::path raw = pack(model_dir, "demo", "none");
  const k3::PackedTrunk raw_trunk =
      k3::PackedTrunk::open(k3::test::local_storage(), raw.string(), k3::test::identity_of(model_dir));
  const k3::streaming::PackedLocations raw_where = k3::streaming::PackedLocations::of(raw_trunk);
  k3::streaming::TensorReader raw_reader(index, *storage, &raw_where);
  k3::streaming::LayerLoader from_raw(c, raw_reader), from_coded(c, coded_reader);
  const std::uint64_t n = from_raw.queue(1, false);
  REQUIRE(from_coded.queue(1, false) == n);
  k3::AlignedBuffer a(n), b(n);
  std::memset(b.data(), 0xAB, n);  // padding must be written, not left as it was
  k3::maths::LayerWeights wa, wb;
  from_raw.read_and_bind(a.data(), wa);
  from_coded.read_and_bind(b.data(), wb);
  CHECK(std::memcmp(a.data(), b.data(), n) == 0);
}

TEST_CASE(
    "coded trunk: the model gives bit-identical logits from it (bf16-zstd, bf16-huff), the uncoded pack and the shards",
    "[pack_trunk][codec]") {
  // tiny (every dtype path), and the trained model's real weight statistics. Not demo: at
  // 400 MB its three packs and nine runs cost a minute and a half and test nothing more.
  for (const fs::path& model : {k3::test::test_model("tiny"), fortune_model()}) {
    CAPTURE(model);
    const std::string name = model.filename().string();
    const fs::path coded = pack(model, name, "bf16-zstd");
    const fs::path huff = pack(model, name, "bf16-huff");
    const fs::path raw = pack(model, name, "none");
    k3::PluginHost host;
    k3::ModelSettings resident;
    resident.kernels = "scalar";
    resident.threads = 2;
    resident.memory.trunk_gb = 1000;
    resident.memory.expert_cache_gb = 1000;
    resident.memory.context = 32;
    const std::vector<float> base = prompt_logits(model, host, resident);
    k3::ModelSettings streamed = resident;
    streamed.memory.trunk_gb = 0.00001;  // nothing pinned
    streamed.memory.expert_cache_gb = 0.00001;
    streamed.memory.stream_embedding = true;
    k3::ModelSettings split = streamed;
    split.memory.split_dense_ffn = k3::PlanInputs::SplitDenseFfn::on;
    split.memory.row_chunk_bytes = 2000;
    for (const fs::path& packed : {raw, coded, huff})
      for (k3::ModelSettings s : {resident, streamed, split}) {
        CAPTURE(packed, s.memory.trunk_gb, static_cast<int>(s.memory.split_dense_ffn));
        s.packed_trunk = packed;
        const std::vector<float> got = prompt_logits(model, host, s);
        REQUIRE(got.size() == base.size());
        CHECK(std::memcmp(got.data(), base.data(), base.size() * 4) == 0);
      }
  }
}

TEST_CASE("coded trunk: a damaged coded block is refused naming trunk.bin and the layer",
          "[pack_trunk][codec][errors]") {
  const fs::path model = k3::test::test_model("tiny");
  const std::string codec = GENERATE(as<std::string>(), "bf16-zstd", "bf16-huff");
  CAPTURE(codec);
  const fs::path coded = pack(model, "tiny", codec);
  const auto fp = k3::test::identity_of(model);
  k3::PluginHost host;
  auto storage = host.create_storage("posix", {});

  const fs::path flipped = copy_of(coded, "coded-flipped-" + codec);
  const k3::PackedTrunk t = k3::PackedTrunk::open(k3::test::local_storage(), flipped.string(), fp);
  const k3::PackedRun& run = t.layers()[1];
  flip_byte(flipped / "trunk.bin", run.file_offset + run.coded_bytes / 2);
  CHECK_THROWS_WITH(t.verify_hashes(*storage), Catch::Contains("trunk.bin") && Catch::Contains("layer 1"));
  // The model streaming from it stops with the same kind of message, never a crash.
  k3::ModelSettings s;
  s.kernels = "scalar";
  s.memory.trunk_gb = 0.00001;
  s.memory.expert_cache_gb = 0.00001;
  s.memory.context = 32;
  s.packed_trunk = flipped;
  try {
    (void)prompt_logits(model, host, s);
    FAIL("a damaged coded layer was read without an error");
  } catch (const k3::RuntimeError& e) {
    CHECK_THAT(e.what(), Catch::Contains("trunk.bin") && Catch::Contains("layer 1") && Catch::Contains("damaged"));
  }

  // A trunk.bin cut short: refused when opened.
  const fs::path cut = copy_of(coded, "coded-cut-" + codec);
  fs::resize_file(cut / "trunk.bin", fs::file_size(cut / "trunk.bin") - 4096);
  CHECK_THROWS_WITH(k3::PackedTrunk::open(k3::test::local_storage(), cut.string(), fp), Catch::Contains("trunk.bin"));

  // trunk.json with a bad stream length, or a codec this k3host does not know.
  const fs::path lied = copy_of(coded, "coded-lied-" + codec);
  nlohmann::json j = read_json(lied / "trunk.json");
  j["layers"][0]["tensors"][0]["coded_bytes"] = j["layers"][0]["tensors"][0]["coded_bytes"].get<std::uint64_t>() + 64;
  write_json(lied / "trunk.json", j);
  CHECK_THROWS_WITH(k3::PackedTrunk::open(k3::test::local_storage(), lied.string(), fp),
                    Catch::Contains("trunk.json") && Catch::Contains("layers[0]"));
  j = read_json(coded / "trunk.json");
  j["codec"] = "lzma";
  write_json(lied / "trunk.json", j);
  CHECK_THROWS_WITH(k3::PackedTrunk::open(k3::test::local_storage(), lied.string(), fp),
                    Catch::Contains("unknown codec") && Catch::Contains("bf16-zstd"));
}

TEST_CASE("coded trunk: an unknown codec is a usage error, in the API and at the CLI", "[pack_trunk][codec][errors]") {
  k3::PackTrunkOptions o;
  o.model = k3::test::test_model("tiny");
  o.out = k3::test::scratch_dir() / "coded-unknown";
  o.codec = "gzip";
  CHECK_THROWS_AS(k3::pack_trunk(o), k3::UsageError);
  CHECK_FALSE(fs::exists(o.out));
  const auto [rc, out] = k3host("pack-trunk --codec gzip " + o.model.string() + " " + o.out.string());
  CHECK(rc == 2);
  CHECK_THAT(out, Catch::Contains("none") && Catch::Contains("bf16-zstd") && Catch::Contains("bf16-huff"));
  const auto [help_rc, help] = k3host("pack-trunk --help");
  CHECK(help_rc == 0);
  CHECK_THAT(help, Catch::Contains("--codec") && Catch::Contains("bf16-zstd"));
}
