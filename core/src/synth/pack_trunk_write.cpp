// k3host pack-trunk: copies every layer's non-expert tensors (and each global tensor) from
// the checkpoint into one 4096-aligned run of trunk.bin, read through a storage plugin,
// hashes each run, verifies trunk.bin by reading it back, writes trunk.json last and
// renames the finished folder into place (see pack_trunk.hpp).
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <charconv>
#include <map>
#include <memory>
#include <system_error>

#include <nlohmann/json.hpp>

#include <k3/error.hpp>
#include <k3/log.hpp>
#include <k3/model_config.hpp>
#include <k3/pack_trunk.hpp>
#include <k3/plugin_host.hpp>

#include "io/pack_trunk_codec.hpp"
#include "io/pack_trunk_format.hpp"
#include "model/tensor_table.hpp"
#include "util/atomic_file.hpp"
#include "util/temp_dir.hpp"

namespace k3 {
namespace {

namespace fs = std::filesystem;
using trunk_format::hex64;

std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

/// XXH64 (seed 0), streamed.
class Hasher {
 public:
  Hasher() : state_(XXH64_createState()) {
    if (!state_) throw std::bad_alloc();
    XXH64_reset(state_.get(), 0);
  }
  void update(const void* p, std::uint64_t n) { XXH64_update(state_.get(), p, static_cast<std::size_t>(n)); }
  std::uint64_t digest() const { return XXH64_digest(state_.get()); }

 private:
  struct Free {
    void operator()(XXH64_state_t* s) const noexcept { XXH64_freeState(s); }
  };
  std::unique_ptr<XXH64_state_t, Free> state_;
};

struct Source {
  const TensorInfo* tensor;
  std::uint64_t run_offset;
};

struct PlannedRun {
  PackedRun run;
  std::vector<Source> sources;  ///< in run order
};

/// Lays out the runs: layers 0..n-1 first (each layer's trunk tensors, checked against the
/// tensor table), then the globals (embedding, output head) one run each, in table order.
std::vector<PlannedRun> plan_runs(const CheckpointIndex& index, const ModelConfig& config) {
  const auto n_layers = static_cast<std::size_t>(config.num_hidden_layers);
  std::vector<std::vector<const TensorInfo*>> layers(n_layers);
  std::vector<const TensorInfo*> globals;
  for (std::size_t i = 0; i < n_layers; ++i)
    table::for_each_layer_tensor(config, static_cast<std::int64_t>(i), [&](const table::Entry& e, const auto&) {
      layers[i].push_back(&table::require(index, e));
    });
  auto global = [&](const table::Entry& e, const auto&) { globals.push_back(&table::require(index, e)); };
  table::for_each_embedding_tensor(config, global);
  table::for_each_head_tensor(config, global);
  auto by_position = [](const TensorInfo* a, const TensorInfo* b) {
    return a->file != b->file ? a->file < b->file : a->offset < b->offset;
  };

  std::vector<PlannedRun> runs;
  auto add_run = [&](std::int64_t layer, std::string name, std::vector<const TensorInfo*> tensors) {
    std::sort(tensors.begin(), tensors.end(), by_position);
    PlannedRun p;
    p.run.layer = layer;
    p.run.name = std::move(name);
    std::uint64_t inside = 0;
    for (const TensorInfo* t : tensors) {
      inside = align_up(inside, kTrunkTensorAlign);
      p.run.tensors.push_back({t->name, t->dtype, t->shape, inside, t->nbytes});
      p.sources.push_back({t, inside});
      inside += t->nbytes;
    }
    p.run.nbytes = inside;  // placed in trunk.bin while it is written
    runs.push_back(std::move(p));
  };
  for (std::size_t i = 0; i < n_layers; ++i)
    add_run(static_cast<std::int64_t>(i), "layer " + std::to_string(i), std::move(layers[i]));
  for (const TensorInfo* t : globals) add_run(-1, t->name, {t});
  return runs;
}

/// True when `dir` holds only what pack-trunk writes: the one kind of folder --force may
/// replace (so a mistyped OUT never deletes a checkpoint or a folder of other files).
bool written_by_pack_trunk(const fs::path& dir) {
  std::error_code ec;
  bool any = false;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name != "trunk.bin" && name != "trunk.json") return false;
    any = true;
  }
  return !ec && any;
}

/// OUT must not be the checkpoint, inside it, or a folder that holds it.
void refuse_overlap(const fs::path& model, const fs::path& out) {
  std::error_code ec;
  const fs::path m = fs::weakly_canonical(model, ec);
  const fs::path o = fs::weakly_canonical(out, ec);
  auto within = [](const fs::path& inner, const fs::path& outer) {
    auto i = inner.begin();
    for (auto it = outer.begin(); it != outer.end(); ++it, ++i)
      if (i == inner.end() || *i != *it) return false;
    return true;
  };
  if (within(o, m))
    throw UsageError(out.string() + ": is the checkpoint folder or inside it; write the packed trunk elsewhere");
  if (within(m, o))
    throw UsageError(out.string() + ": holds the checkpoint " + model.string() + "; write the packed trunk elsewhere");
}

nlohmann::json run_json(const PackedRun& run) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& t : run.tensors) {
    nlohmann::json tj = {{"name", t.name}, {"dtype", to_string(t.dtype)}, {"shape", t.shape}, {"off", t.offset},
                         {"nbytes", t.nbytes}};
    if (run.coded()) {
      tj["coded_off"] = t.coded_offset;
      tj["coded_bytes"] = t.coded_bytes;
    }
    tensors.push_back(std::move(tj));
  }
  nlohmann::json j = {{"file_off", run.file_offset}, {"nbytes", run.nbytes}, {"xxh64", hex64(run.xxh64)},
                      {"tensors", std::move(tensors)}};
  if (run.coded()) {
    j["coded_bytes"] = run.coded_bytes;
    j["raw_xxh64"] = hex64(run.raw_xxh64);
  }
  if (run.layer >= 0)
    j["layer"] = run.layer;
  else
    j["name"] = run.name;
  return j;
}

}  // namespace

PackTrunkResult pack_trunk(const PackTrunkOptions& options) {
  if (!fs::is_directory(options.model))
    throw UsageError(options.model.string() + ": no such checkpoint directory");
  PluginHost host;
  auto storage = host.create_storage(options.storage, {});
  const ModelConfig config = read_model_config(*storage, options.model.string());
  const CheckpointIndex index = CheckpointIndex::open(*storage, options.model.string());
  const fs::path out = options.out.has_filename() ? options.out : options.out.parent_path();
  refuse_overlap(options.model, out);
  if (fs::exists(out) && !options.force)
    throw UsageError(out.string() + ": already exists (use --force to replace it)");
  if (fs::exists(out) && !(fs::is_directory(out) && (fs::is_empty(out) || written_by_pack_trunk(out))))
    throw UsageError(out.string() + ": not a folder pack-trunk wrote (only trunk.bin and trunk.json); --force "
                     "replaces only those");
  if (out.has_parent_path()) fs::create_directories(out.parent_path());

  trunk_codec::Codec codec = trunk_codec::Codec::none;
  if (!trunk_codec::parse_codec(options.codec, codec))
    throw UsageError("unknown codec '" + options.codec + "' (known: " + trunk_codec::known_codecs() + ")");

  std::vector<PlannedRun> runs = plan_runs(index, config);
  PackTrunkResult result;
  result.fingerprint = config.fingerprint();
  for (const auto& p : runs) {
    result.data_bytes += p.run.nbytes;
    result.tensors += p.run.tensors.size();
  }
  result.runs = runs.size();

  TempDir temp(out);
  const fs::path bin = temp.path() / "trunk.bin";

  std::map<std::uint32_t, std::unique_ptr<sdk::StorageFile>> shards;
  auto shard = [&](std::uint32_t file) -> sdk::StorageFile& {
    auto& slot = shards[file];
    if (!slot) {
      const std::string& path = index.files()[file].uri;
      const sdk::Status st = storage->open(path, slot);
      if (!st.ok()) throw RuntimeError(st.detail);
    }
    return *slot;
  };

  // Copy (or code) run after run, hashing each as it goes. A coded run's offsets in trunk.bin
  // depend on the sizes of the runs coded before it, so every run is placed here.
  {
    AtomicFile out_bin(bin);
    std::vector<std::byte> buffer(static_cast<std::size_t>(std::min<std::uint64_t>(trunk_format::kChunk, result.data_bytes + 1)));
    std::vector<std::byte> tensor, stream;
    std::unique_ptr<trunk_codec::Encoder> encoder;
    if (codec != trunk_codec::Codec::none) encoder = std::make_unique<trunk_codec::Encoder>(
        trunk_codec::EncodeOptions{trunk_codec::kDefaultBlockRaw, options.codec_level, trunk_codec::kDefaultMinMatch,
                                   codec == trunk_codec::Codec::bf16_huff});
    const std::byte zeros[kTrunkTensorAlign] = {};
    std::uint64_t copied = 0, cursor = 0;
    const char* phase = encoder ? "code" : "copy";  // one phase for every run (the progress line restarts per phase)
    for (auto& p : runs) {
      Hasher raw;
      p.run.file_offset = cursor;
      std::uint64_t position = 0;  // within the run
      if (!encoder || p.run.layer < 0) {  // raw: global runs always (read in pieces)
        for (const Source& s : p.sources) {
          raw.update(zeros, s.run_offset - position);  // inter-tensor padding
          sdk::StorageFile& file = shard(s.tensor->file);
          for (std::uint64_t done = 0; done < s.tensor->nbytes;) {
            const std::uint64_t n = std::min<std::uint64_t>(s.tensor->nbytes - done, buffer.size());
            sdk::ReadRequest request{s.tensor->offset + done, n, buffer.data()};
            const sdk::Status st = file.read({&request, 1});
            if (!st.ok()) throw RuntimeError("reading tensor " + s.tensor->name + ": " + st.detail);
            raw.update(buffer.data(), n);
            out_bin.pwrite(buffer.data(), static_cast<std::size_t>(n), p.run.file_offset + s.run_offset + done);
            done += n;
            copied += n;
            if (options.progress) options.progress(phase, copied, result.data_bytes);
          }
          position = s.run_offset + s.tensor->nbytes;
        }
        p.run.xxh64 = raw.digest();
      } else {  // coded: each tensor's stream, back to back at 64-byte alignment
        Hasher coded;
        std::uint64_t coded_position = 0;
        for (std::size_t k = 0; k < p.sources.size(); ++k) {
          const Source& s = p.sources[k];
          raw.update(zeros, s.run_offset - position);
          tensor.resize(static_cast<std::size_t>(s.tensor->nbytes));
          sdk::ReadRequest request{s.tensor->offset, s.tensor->nbytes, tensor.data()};
          const sdk::Status st = shard(s.tensor->file).read({&request, 1});
          if (!st.ok()) throw RuntimeError("reading tensor " + s.tensor->name + ": " + st.detail);
          raw.update(tensor.data(), tensor.size());
          stream.clear();
          encoder->encode(tensor, s.tensor->dtype, stream);
          const std::uint64_t at = align_up(coded_position, kTrunkTensorAlign);
          coded.update(zeros, at - coded_position);
          coded.update(stream.data(), stream.size());
          out_bin.pwrite(stream.data(), stream.size(), p.run.file_offset + at);
          p.run.tensors[k].coded_offset = at;
          p.run.tensors[k].coded_bytes = stream.size();
          coded_position = at + stream.size();
          position = s.run_offset + s.tensor->nbytes;
          copied += s.tensor->nbytes;
          if (options.progress) options.progress(phase, copied, result.data_bytes);
        }
        p.run.coded_bytes = coded_position;
        p.run.xxh64 = coded.digest();
        p.run.raw_xxh64 = raw.digest();
      }
      result.stored_bytes += p.run.stored_bytes();
      cursor += p.run.padded_bytes();
    }
    result.bin_bytes = cursor;
    out_bin.resize(result.bin_bytes);
    out_bin.commit();
  }

  // Verify: read trunk.bin back through the same storage plugin.
  {
    std::unique_ptr<sdk::StorageFile> written;
    if (const sdk::Status st = storage->open(bin.string(), written); !st.ok()) throw RuntimeError(st.detail);
    if (written->size() != result.bin_bytes)
      throw RuntimeError(bin.string() + ": verification failed: " + std::to_string(written->size()) +
                         " bytes on disk, expected " + std::to_string(result.bin_bytes));
    std::uint64_t checked = 0;
    for (const auto& p : runs) {
      const std::uint64_t h = trunk_format::hash_range(*written, bin.string(), p.run.file_offset, p.run.stored_bytes(),
                                                       [&](std::uint64_t n) {
                                                         checked += n;
                                                         if (options.progress) options.progress("verify", checked, result.stored_bytes);
                                                       });
      if (h != p.run.xxh64)
        throw RuntimeError(bin.string() + ": verification failed: run '" + p.run.name + "' at offset " +
                           std::to_string(p.run.file_offset) + " reads back with xxh64 " + hex64(h) + ", wrote " +
                           hex64(p.run.xxh64));
      // A coded run must decode to exactly what was read from the checkpoint.
      if (p.run.coded() && trunk_format::decoded_hash(*written, bin.string(), p.run) != p.run.raw_xxh64)
        throw RuntimeError(bin.string() + ": verification failed: run '" + p.run.name +
                           "' does not decode to the checkpoint's bytes");
    }
  }

  // The manifest last: its presence marks a finished trunk.
  nlohmann::json layers = nlohmann::json::array();
  nlohmann::json globals = nlohmann::json::array();
  for (const auto& p : runs) (p.run.layer >= 0 ? layers : globals).push_back(run_json(p.run));
  nlohmann::json manifest = {{"format", trunk_format::kFormat},
                             {"version", codec == trunk_codec::Codec::none ? trunk_format::kVersion
                                                                            : trunk_format::kCodedVersion},
                             {"align", kTrunkAlign},
                             {"config_fingerprint", hex64(result.fingerprint)},
                             {"model", fs::absolute(options.model).lexically_normal().string()},
                             {"trunk_bin_bytes", result.bin_bytes},
                             {"n_layers", config.num_hidden_layers},
                             {"layers", std::move(layers)},
                             {"globals", std::move(globals)}};
  if (codec != trunk_codec::Codec::none) manifest["codec"] = std::string(trunk_codec::name(codec));
  write_file_atomically(temp.path() / "trunk.json", manifest.dump(1) + "\n");

  temp.commit(written_by_pack_trunk);
  result.dir = out;
  return result;
}

}  // namespace k3
