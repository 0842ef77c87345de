// Reading through a packed trunk: a layer is one read request from trunk.bin and binds the
// same bytes as the per-tensor reads from the shards; the model runs bit-identically from it
// (resident, streamed, split), refuses a trunk packed from another checkpoint (of another
// architecture, or of the same one with other weights), and stops at a flipped byte of any
// run it reads, raw or coded, naming trunk.bin, the run and the offset.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

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

/// Counts the requests of every read through the wrapped backend, per file name.
class CountingStorage final : public k3::sdk::StorageBackend {
 public:
  explicit CountingStorage(std::shared_ptr<k3::sdk::StorageBackend> inner) : inner_(std::move(inner)) {}
  k3::sdk::Status open(std::string_view uri, std::unique_ptr<k3::sdk::StorageFile>& out) noexcept override {
    std::unique_ptr<k3::sdk::StorageFile> f;
    const k3::sdk::Status st = inner_->open(uri, f);
    if (st.ok()) out = std::make_unique<File>(std::move(f), fs::path(uri).filename().string(), *this);
    return st;
  }
  k3::sdk::Status list(std::string_view uri, std::vector<std::string>& names) noexcept override {
    return inner_->list(uri, names);
  }
  std::map<std::string, std::size_t> requests;  ///< file name → requests read

 private:
  class File final : public k3::sdk::StorageFile {
   public:
    File(std::unique_ptr<k3::sdk::StorageFile> f, std::string name, CountingStorage& owner)
        : f_(std::move(f)), name_(std::move(name)), owner_(owner) {}
    std::uint64_t size() const noexcept override { return f_->size(); }
    std::uint32_t alignment() const noexcept override { return f_->alignment(); }
    k3::sdk::Status read(std::span<k3::sdk::ReadRequest> batch) noexcept override {
      owner_.requests[name_] += batch.size();
      return f_->read(batch);
    }

   private:
    std::unique_ptr<k3::sdk::StorageFile> f_;
    std::string name_;
    CountingStorage& owner_;
  };
  std::shared_ptr<k3::sdk::StorageBackend> inner_;
};

fs::path pack(const std::string& geometry, const std::string& codec = "none") {
  k3::PackTrunkOptions o;
  o.model = k3::test::test_model(geometry);
  o.out = k3::test::scratch_dir() / ("packed-reader-" + geometry + "-" + codec);
  o.force = true;
  o.codec = codec;
  return k3::pack_trunk(o).dir;
}

/// A copy of the packed folder `from` with the byte at `offset` of trunk.bin flipped.
fs::path flipped_copy(const fs::path& from, const std::string& name, std::uint64_t offset) {
  const fs::path to = k3::test::scratch_dir() / name;
  fs::remove_all(to);
  fs::copy(from, to, fs::copy_options::recursive);
  std::fstream f(to / "trunk.bin", std::ios::binary | std::ios::in | std::ios::out);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  f.seekp(static_cast<std::streamoff>(offset));
  c = static_cast<char>(c ^ 0x10);
  f.write(&c, 1);
  REQUIRE(f.good());
  return to;
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

}  // namespace

TEST_CASE("packed trunk: a layer is one read from trunk.bin, with the shards' bytes", "[pack_trunk]") {
  const fs::path model_dir = k3::test::test_model("demo");
  const fs::path packed_dir = pack("demo");
  const k3::ModelConfig c = k3::test::read_config(model_dir);
  const k3::CheckpointIndex index = k3::test::open_index(model_dir);
  const k3::PackedTrunk trunk =
      k3::PackedTrunk::open(k3::test::local_storage(), packed_dir.string(), k3::test::identity_of(model_dir));
  const k3::streaming::PackedLocations where = k3::streaming::PackedLocations::of(trunk);
  k3::PluginHost host;
  CountingStorage counting(host.create_storage("posix", {}));
  k3::streaming::TensorReader plain_reader(index, counting);
  k3::streaming::TensorReader packed_reader(index, counting, &where);
  k3::streaming::LayerLoader plain(c, plain_reader), packed(c, packed_reader);

  for (std::size_t li = 0; li < static_cast<std::size_t>(c.num_hidden_layers); ++li) {
    CAPTURE(li);
    const std::uint64_t n_plain = plain.queue(li, false);
    const std::uint64_t n_packed = packed.queue(li, false);
    CHECK(n_packed == trunk.layers()[li].nbytes);  // the run's layout, byte for byte
    k3::AlignedBuffer a(n_plain), b(n_packed);
    k3::maths::LayerWeights wa, wb;
    counting.requests.clear();
    packed.read_and_bind(b.data(), wb);
    CHECK(counting.requests.size() == 1);
    CHECK(counting.requests["trunk.bin"] == 1);
    plain.read_and_bind(a.data(), wa);
    // Same bytes behind every view.
    CHECK(std::memcmp(wa.input_layernorm.data(), wb.input_layernorm.data(), wa.input_layernorm.size() * 4) == 0);
    auto same = [](const k3::maths::Matrix& x, const k3::maths::Matrix& y) {
      return x.rows == y.rows && x.cols == y.cols && x.f32 == y.f32 &&
             std::memcmp(x.w, y.w, x.rows * x.cols * x.element_bytes()) == 0;
    };
    if (wa.dense) {
      CHECK(same(wa.dense_w.gate_proj, wb.dense_w.gate_proj));
      CHECK(same(wa.dense_w.down_proj, wb.dense_w.down_proj));
    } else {
      CHECK(same(wa.moe.gate, wb.moe.gate));
      CHECK(same(wa.moe.shared_down, wb.moe.shared_down));
    }
    if (wa.mla)
      CHECK(same(wa.mla_w.o_proj, wb.mla_w.o_proj));
    else
      CHECK(same(wa.kda.q_proj, wb.kda.q_proj));
  }
}

TEST_CASE(
    "packed trunk: a layer read in many pieces, each hashed while the next is read, has the run's bytes, and "
    "a flipped byte in any piece is caught",
    "[pack_trunk]") {
  const fs::path model_dir = k3::test::test_model("tiny");
  const fs::path packed_dir = pack("tiny");
  const k3::ModelConfig c = k3::test::read_config(model_dir);
  const k3::CheckpointIndex index = k3::test::open_index(model_dir);
  const k3::PackedTrunk trunk =
      k3::PackedTrunk::open(k3::test::local_storage(), packed_dir.string(), k3::test::identity_of(model_dir));
  const k3::streaming::PackedLocations where = k3::streaming::PackedLocations::of(trunk);
  k3::PluginHost host;
  CountingStorage counting(host.create_storage("posix", {}));
  k3::streaming::TensorReader plain_reader(index, counting);
  k3::streaming::TensorReader packed_reader(index, counting, &where);
  packed_reader.set_raw_piece(1000);  // pieces that cut tensors anywhere, not at alignments
  k3::streaming::LayerLoader plain(c, plain_reader), packed(c, packed_reader);
  for (std::size_t li = 0; li < static_cast<std::size_t>(c.num_hidden_layers); ++li) {
    CAPTURE(li);
    const std::uint64_t n = trunk.layers()[li].nbytes;
    REQUIRE(packed.queue(li, false) == n);
    (void)plain.queue(li, false);
    k3::AlignedBuffer a(n), b(n);
    k3::maths::LayerWeights wa, wb;
    counting.requests.clear();
    packed.read_and_bind(b.data(), wb);
    CHECK(counting.requests["trunk.bin"] == (n + 999) / 1000);
    plain.read_and_bind(a.data(), wa);
    CHECK(std::memcmp(wa.input_layernorm.data(), wb.input_layernorm.data(), wa.input_layernorm.size() * 4) == 0);
  }
  // A flipped byte in the middle of layer 2's run: caught whichever piece holds it.
  const k3::PackedRun& run = trunk.layers()[2];
  const fs::path damaged = flipped_copy(packed_dir, "packed-pieces-flipped", run.file_offset + run.nbytes / 2);
  const k3::PackedTrunk bad =
      k3::PackedTrunk::open(k3::test::local_storage(), damaged.string(), k3::test::identity_of(model_dir));
  const k3::streaming::PackedLocations bad_where = k3::streaming::PackedLocations::of(bad);
  k3::streaming::TensorReader bad_reader(index, counting, &bad_where);
  bad_reader.set_raw_piece(1000);
  k3::streaming::LayerLoader from_bad(c, bad_reader);
  k3::AlignedBuffer buffer(from_bad.queue(2, false));
  k3::maths::LayerWeights w;
  CHECK_THROWS_WITH(from_bad.read_and_bind(buffer.data(), w),
                    Catch::Contains("trunk.bin") && Catch::Contains("run 'layer 2'") && Catch::Contains("damaged"));
}

TEST_CASE("packed trunk: the model gives the same logits from it, resident, streamed and split", "[pack_trunk]") {
  const fs::path dir = k3::test::test_model("tiny");
  const fs::path packed = pack("tiny");
  k3::PluginHost host;
  k3::ModelSettings resident;
  resident.kernels = "scalar";
  resident.threads = 2;
  resident.memory.trunk_gb = 1000;
  resident.memory.expert_cache_gb = 1000;
  resident.memory.context = 32;
  const std::vector<float> base = prompt_logits(dir, host, resident);

  k3::ModelSettings packed_resident = resident;
  packed_resident.packed_trunk = packed;
  k3::ModelSettings streamed = packed_resident;
  streamed.memory.trunk_gb = 0.00001;  // nothing pinned
  streamed.memory.expert_cache_gb = 0.00001;
  streamed.memory.stream_embedding = true;
  k3::ModelSettings split = streamed;
  split.memory.split_dense_ffn = k3::PlanInputs::SplitDenseFfn::on;
  split.memory.row_chunk_bytes = 2000;
  for (const auto* s : {&packed_resident, &streamed, &split}) {
    const std::vector<float> got = prompt_logits(dir, host, *s);
    REQUIRE(got.size() == base.size());
    CHECK(std::memcmp(got.data(), base.data(), base.size() * 4) == 0);
  }
}

TEST_CASE("packed trunk: one packed from another model is refused", "[pack_trunk][errors]") {
  const fs::path other = pack("tiny2");
  k3::PluginHost host;
  k3::ModelSettings s;
  s.kernels = "scalar";
  s.memory.trunk_gb = 0.00001;
  s.memory.expert_cache_gb = 0.00001;
  s.memory.context = 32;
  s.packed_trunk = other;
  try {
    k3::Model model(k3::test::test_model("tiny"), host, s);
    FAIL("a trunk packed from tiny2 was accepted for tiny");
  } catch (const k3::UsageError& e) {
    CHECK_THAT(e.what(), Catch::Contains("trunk.json") && Catch::Contains("checkpoint identity"));
  }
  s.packed_trunk = k3::test::scratch_dir() / "no-such-trunk";
  CHECK_THROWS_AS(k3::Model(k3::test::test_model("tiny"), host, s), k3::UsageError);
}

TEST_CASE(
    "packed trunk: a flipped byte of any run it reads, raw or coded, stops the model naming trunk.bin, the run and "
    "the offset",
    "[pack_trunk][errors]") {
  const fs::path dir = k3::test::test_model("tiny");
  const k3::ModelConfig c = k3::test::read_config(dir);
  k3::PluginHost host;
  k3::ModelSettings resident;
  resident.kernels = "scalar";
  resident.threads = 1;
  resident.memory.trunk_gb = 1000;
  resident.memory.expert_cache_gb = 1000;
  resident.memory.context = 32;
  k3::ModelSettings streamed = resident;  // the ring, embedding rows and lm_head in row chunks
  streamed.memory.trunk_gb = 0.00001;
  streamed.memory.expert_cache_gb = 0.00001;
  streamed.memory.stream_embedding = true;
  k3::ModelSettings split = streamed;  // a dense layer's FFN in row chunks too
  split.memory.split_dense_ffn = k3::PlanInputs::SplitDenseFfn::on;
  split.memory.row_chunk_bytes = 2000;
  struct Target {
    std::string tensor;
    std::uint64_t row;  ///< the byte flipped is in this row (of a matrix), or at the start of a vector
    std::vector<const k3::ModelSettings*> runs;
  };
  const std::string dense_down = "language_model.model.layers.0.mlp.down_proj.weight";
  REQUIRE(c.first_k_dense_replace > 0);
  for (const std::string& codec : {std::string("none"), std::string("bf16-zstd")}) {
    const fs::path packed = pack("tiny", codec);
    const k3::PackedTrunk trunk =
        k3::PackedTrunk::open(k3::test::local_storage(), packed.string(), k3::test::identity_of(dir));
    std::vector<Target> targets = {
        {"language_model.model.embed_tokens.weight", 42, {&resident, &streamed}},  // a row the prompt reads
        {"language_model.lm_head.weight", 3, {&resident, &streamed}},
        {"language_model.model.norm.weight", 0, {&resident, &streamed}},
    };
    if (codec == "none") {  // a coded layer run's blocks carry the codec's own checksums as well
      targets.push_back({"language_model.model.layers.1.input_layernorm.weight", 0, {&resident, &streamed}});
      targets.push_back({dense_down, 2, {&split}});
    }
    for (const Target& target : targets) {
      const k3::PackedRun* run = nullptr;
      const k3::PackedTensor* t = nullptr;
      for (const auto* runs : {&trunk.layers(), &trunk.globals()})
        for (const auto& r : *runs)
          if (const auto* x = r.find(target.tensor)) run = &r, t = x;
      REQUIRE(t != nullptr);
      REQUIRE_FALSE(run->coded());
      const std::uint64_t row_bytes = t->shape.size() == 2 ? t->nbytes / t->shape[0] : 0;
      const std::uint64_t at = run->file_offset + t->offset + target.row * row_bytes + 1;
      const fs::path damaged = flipped_copy(packed, "packed-flipped", at);
      for (const k3::ModelSettings* settings : target.runs) {
        CAPTURE(codec, target.tensor, settings->memory.trunk_gb, static_cast<int>(settings->memory.split_dense_ffn));
        k3::ModelSettings s = *settings;
        s.packed_trunk = damaged;
        try {
          (void)prompt_logits(dir, host, s);
          FAIL("a flipped byte of trunk.bin was read without an error");
        } catch (const k3::RuntimeError& e) {
          CHECK_THAT(e.what(), Catch::Contains("trunk.bin") && Catch::Contains("run '" + run->name + "'") &&
                                   Catch::Contains(target.tensor) && Catch::Contains("offset") &&
                                   Catch::Contains("damaged"));
        }
      }
    }
  }
}
