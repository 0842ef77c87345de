// pack-trunk --layers A-B: a pack of some layers only. The model gives bit-identical logits
// and ids from a partial pack (raw and coded), a whole pack and the shards; the packed
// layers are read from trunk.bin (and checked there: a flipped byte is refused naming the
// layer), the others and the global tensors from the shards; trunk.json records the range,
// and a range that does not match its layers or the run's checkpoint, or a pack of another
// checkpoint, is refused (exit 2); a bad --layers is a usage error naming the flag.
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <k3/checkpoint.hpp>
#include <k3/error.hpp>
#include <k3/geometry.hpp>
#include <k3/model.hpp>
#include <k3/model_config.hpp>
#include <k3/pack_trunk.hpp>
#include <k3/plugin_host.hpp>

#include "local_storage.hpp"
#include "streaming/tensor_reader.hpp"
#include "test_models.hpp"

namespace fs = std::filesystem;

namespace {

k3::test::ScratchCleanup cleanup;

fs::path pack(const fs::path& model, const std::string& codec, std::optional<k3::TrunkLayerRange> layers) {
  k3::PackTrunkOptions o;
  o.model = model;
  o.out =
      k3::test::scratch_dir() /
      ("partial-" + codec + (layers ? "-" + std::to_string(layers->first) + "-" + std::to_string(layers->last) : ""));
  o.force = true;
  o.codec = codec;
  o.layers = layers;
  return k3::pack_trunk(o).dir;
}

std::vector<float> prompt_logits(const fs::path& dir, k3::PluginHost& host, const k3::ModelSettings& s) {
  k3::Model model(dir, host, s);
  k3::Session session(model, 32);
  const std::uint32_t prompt[] = {1, 7, 42, 3, 99};
  std::vector<float> logits, all;
  session.feed({prompt, 5}, true, logits);
  all = logits;
  for (int i = 0; i < 2; ++i) {
    const std::uint32_t next = static_cast<std::uint32_t>(i + 11);
    session.feed({&next, 1}, false, logits);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream f(p);
  return nlohmann::json::parse(f);
}

void write_json(const fs::path& p, const nlohmann::json& j) { std::ofstream(p) << j.dump(1); }

fs::path copy_of(const fs::path& from, const std::string& name) {
  const fs::path to = k3::test::scratch_dir() / name;
  fs::remove_all(to);
  fs::copy(from, to, fs::copy_options::recursive);
  return to;
}

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

/// A k3host run of `model` (everything streamed) with `packed` (none when empty): 4 new ids.
std::pair<int, std::string> run(const fs::path& model, const fs::path& packed) {
  return k3host("--config " + (fs::path(K3_SOURCE_DIR) / "configs/default.yaml").string() +
                " --set model.generate_if_missing=false --set threads=1 --set memory.context=64"
                " --set job.max_new_tokens=4 --set job.stop_at_eos=false --ids 5,17 --quiet"
                " --set memory.trunk_gb=0.00005 --set memory.expert_cache_gb=0.00005 --set memory.stream_embedding=true"
                " --set model.path=" +
                model.string() + (packed.empty() ? std::string() : " --set model.packed_trunk=" + packed.string()));
}

}  // namespace

TEST_CASE(
    "partial trunk: trunk.json records the range, the packed layers come from trunk.bin and the rest from the shards",
    "[pack_trunk][partial]") {
  const fs::path model = k3::test::test_model("tiny");
  const auto fp = k3::test::identity_of(model);
  const k3::ModelConfig c = k3::test::read_config(model);
  const k3::CheckpointIndex index = k3::test::open_index(model);
  k3::PluginHost host;
  auto storage = host.create_storage("posix", {});
  for (const std::string codec : {"none", "bf16-zstd"}) {
    CAPTURE(codec);
    const fs::path partial = pack(model, codec, k3::TrunkLayerRange{2, 4});
    const nlohmann::json j = read_json(partial / "trunk.json");
    CHECK(j["layer_range"] == nlohmann::json::array({2, 4}));
    CHECK(j["n_layers"] == 6);
    CHECK(j["globals"].empty());
    CHECK(read_json(pack(model, codec, std::nullopt) / "trunk.json")["layer_range"] == nlohmann::json::array({0, 5}));
    const k3::PackedTrunk t = k3::PackedTrunk::open(k3::test::local_storage(), partial.string(), fp, {}, 6);
    CHECK(t.partial());
    CHECK(t.first_layer() == 2);
    CHECK(t.last_layer() == 4);
    REQUIRE(t.layers().size() == 3);
    for (std::size_t i = 0; i < 3; ++i) CHECK(t.layers()[i].layer == static_cast<std::int64_t>(2 + i));
    CHECK(t.layers()[0].coded() == (codec != "none"));
    CHECK_NOTHROW(t.verify_hashes(*storage));
    // Where a reader takes each layer's tensors from: trunk.bin for 2..4, the shards otherwise.
    const k3::streaming::PackedLocations where = k3::streaming::PackedLocations::of(t);
    k3::streaming::TensorReader reader(index, *storage, &where);
    for (std::int64_t li = 0; li < 6; ++li) {
      CAPTURE(li);
      const std::string name = k3::tensor_names::layer(li, "input_layernorm.weight");
      const k3::streaming::TensorSource src = reader.locate(*index.find(name));
      const bool packed = li >= 2 && li <= 4;
      // A coded tensor is located in its shard (raw bytes, for reads of parts); raw ones in trunk.bin.
      CHECK(src.file_name.ends_with("trunk.bin") == (packed && codec == "none"));
      CHECK(where.where.contains(name) == packed);
    }
    CHECK_FALSE(where.where.contains(std::string(k3::tensor_names::kLmHead)));
  }
}

TEST_CASE("partial trunk: bit-identical logits and ids from a partial pack (raw, coded), a whole pack and the shards",
          "[pack_trunk][partial]") {
  const fs::path model = k3::test::test_model("tiny");
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
  k3::ModelSettings split = streamed;  // the dense layer 0's FFN in row chunks (from trunk.bin when packed raw)
  split.memory.split_dense_ffn = k3::PlanInputs::SplitDenseFfn::on;
  split.memory.row_chunk_bytes = 2000;
  const auto [base_rc, base_ids] = run(model, {});
  REQUIRE(base_rc == 0);
  // The first layer (dense), inner layers, the last layer, and the whole trunk.
  const std::vector<std::optional<k3::TrunkLayerRange>> ranges = {k3::TrunkLayerRange{0, 1}, k3::TrunkLayerRange{2, 3},
                                                                  k3::TrunkLayerRange{5, 5}, std::nullopt};
  for (const std::string codec : {"none", "bf16-zstd"})
    for (const auto& range : ranges) {
      const fs::path packed = pack(model, codec, range);
      for (k3::ModelSettings s : {resident, streamed, split}) {
        CAPTURE(codec, range ? range->first : -1, range ? range->last : -1, s.memory.trunk_gb,
                static_cast<int>(s.memory.split_dense_ffn));
        s.packed_trunk = packed;
        const std::vector<float> got = prompt_logits(model, host, s);
        REQUIRE(got.size() == base.size());
        CHECK(std::memcmp(got.data(), base.data(), base.size() * 4) == 0);
      }
      const auto [rc, ids] = run(model, packed);
      CHECK(rc == 0);
      CHECK(ids == base_ids);
    }
}

TEST_CASE("partial trunk: a flipped byte of a packed layer is refused naming trunk.bin and the layer",
          "[pack_trunk][partial][errors]") {
  const fs::path model = k3::test::test_model("tiny");
  const auto fp = k3::test::identity_of(model);
  for (const std::string codec : {"none", "bf16-zstd"}) {
    CAPTURE(codec);
    const fs::path damaged = copy_of(pack(model, codec, k3::TrunkLayerRange{3, 4}), "partial-flipped-" + codec);
    const k3::PackedTrunk t = k3::PackedTrunk::open(k3::test::local_storage(), damaged.string(), fp);
    const k3::PackedRun& run4 = t.layers()[1];
    REQUIRE(run4.layer == 4);
    {  // the middle of its largest tensor (of its coded stream, when coded): not padding
      const k3::PackedTensor* big = &run4.tensors.front();
      for (const auto& x : run4.tensors)
        if (x.nbytes > big->nbytes) big = &x;
      std::fstream f(damaged / "trunk.bin", std::ios::binary | std::ios::in | std::ios::out);
      const auto at = static_cast<std::streamoff>(
          run4.file_offset + (run4.coded() ? big->coded_offset + big->coded_bytes / 2 : big->offset + big->nbytes / 2));
      f.seekg(at);
      char ch = 0;
      f.read(&ch, 1);
      f.seekp(at);
      ch = static_cast<char>(ch ^ 0x04);
      f.write(&ch, 1);
    }
    const auto [rc, out] = run(model, damaged);
    CHECK(rc == 1);
    CHECK_THAT(out, Catch::Contains("trunk.bin") && Catch::Contains("layer 4") && Catch::Contains("damaged"));
  }
}

TEST_CASE(
    "partial trunk: a range that does not match its layers or the checkpoint, or another checkpoint's pack, is refused",
    "[pack_trunk][partial][errors]") {
  const fs::path model = k3::test::test_model("tiny");
  const auto fp = k3::test::identity_of(model);
  const fs::path good = pack(model, "none", k3::TrunkLayerRange{1, 3});
  const nlohmann::json j = read_json(good / "trunk.json");
  const fs::path lied = copy_of(good, "partial-lied");
  auto refused = [&](const nlohmann::json& manifest, const std::string& says) {
    write_json(lied / "trunk.json", manifest);
    CHECK_THROWS_AS(k3::PackedTrunk::open(k3::test::local_storage(), lied.string(), fp, {}, 6), k3::UsageError);
    CHECK_THROWS_WITH(k3::PackedTrunk::open(k3::test::local_storage(), lied.string(), fp, {}, 6),
                      Catch::Contains("trunk.json") && Catch::Contains(says));
    const auto [rc, out] = run(model, lied);
    CHECK(rc == 2);
    CHECK_THAT(out, Catch::Contains("trunk.json") && Catch::Contains(says));
  };
  {
    INFO("a range of another length than the layers listed");
    nlohmann::json m = j;
    m["layer_range"] = {1, 4};
    refused(m, "\"layer_range\" [1, 4] is 4 layers, \"layers\" lists 3");
  }
  {
    INFO("layers numbered other than the range says");
    nlohmann::json m = j;
    m["layer_range"] = {0, 2};
    refused(m, "layers[0]: \"layer\" must be 0");
  }
  {
    INFO("a range past the checkpoint's last layer (numbered to match)");
    nlohmann::json m = j;
    m["layer_range"] = {4, 6};
    for (int i = 0; i < 3; ++i) m["layers"][i]["layer"] = 4 + i;
    refused(m, "layers 4-6 packed, but \"n_layers\" is 6");
    m.erase("n_layers");  // and without the count trunk.json records: against the run's checkpoint
    refused(m, "layers 4-6 packed, but this run's checkpoint has 6 layers (0-5)");
  }
  {
    INFO("another layer count than the run's checkpoint");
    nlohmann::json m = j;
    m["n_layers"] = 7;
    refused(m, "packed from a checkpoint of 7 layers; this run's has 6");
  }
  {
    INFO("not a range");
    nlohmann::json m = j;
    m["layer_range"] = {3, 1};
    refused(m, "\"layer_range\" must be [first, last]");
  }
  {
    INFO("global runs in a pack of some layers");
    nlohmann::json m = j;
    m["globals"] = read_json(pack(model, "none", std::nullopt) / "trunk.json")["globals"];
    refused(m, "has global runs");
  }
  // A partial pack of another checkpoint of the same architecture (other weights): refused
  // by its identity, as a whole pack is.
  const fs::path other = k3::test::scratch_dir() / "partial-other-model";
  const auto [mk_rc, mk_out] = k3host("-q make-model -g tiny --seed 2 --force -o " + other.string());
  REQUIRE(mk_rc == 0);
  const auto [rc, out] = run(other, good);
  CHECK(rc == 2);
  CHECK_THAT(out, Catch::Contains("trunk.json: packed from checkpoint") && Catch::Contains("checkpoint identity"));
}

TEST_CASE("partial trunk: a bad --layers is a usage error naming the flag, and writes nothing",
          "[pack_trunk][partial][errors]") {
  const fs::path model = k3::test::test_model("tiny");
  const fs::path out = k3::test::scratch_dir() / "partial-bad";
  for (const std::string bad : {"5-2", "x", "1-", "-3", "2-x", "0-6", "6", "1-99"}) {
    CAPTURE(bad);
    const auto [rc, text] = k3host("pack-trunk --layers=" + bad + " " + model.string() + " " + out.string());
    CHECK(rc == 2);
    CHECK_THAT(text, Catch::Contains("--layers"));
    CHECK_FALSE(fs::exists(out));
  }
  k3::PackTrunkOptions o;
  o.model = model;
  o.out = out;
  o.layers = k3::TrunkLayerRange{4, 6};
  CHECK_THROWS_AS(k3::pack_trunk(o), k3::UsageError);
  CHECK_THROWS_WITH(k3::pack_trunk(o), Catch::Contains("--layers 4-6") && Catch::Contains("has 6 layers (0-5)"));
  CHECK_FALSE(fs::exists(out));
  const auto [help_rc, help] = k3host("pack-trunk --help");
  CHECK(help_rc == 0);
  CHECK_THAT(help, Catch::Contains("--layers"));
}
