// k3host pack-trunk: copies every layer's non-expert tensors (and each global tensor) from
// the checkpoint into one 4096-aligned run of trunk.bin, read through a storage plugin,
// hashes each run, each tensor and each row of the tensors read in rows, writes the row
// table after the runs, verifies trunk.bin by reading it back, writes trunk.json (with the
// checkpoint's identity and the layer range packed) last and renames the finished folder
// into place (see k3/packed_trunk.hpp). With a layer range (--layers A-B) only those layers
// are packed, no global tensor: a run reads the rest from the shards.
#include <unistd.h>
#include "io/xxh3.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
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
using io::trunk_format::hex64;

std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

/// XXH3-64 (seed 0), streamed.
class Hasher {
 public:
  Hasher() : state_(XXH3_createState()) {
    if (!state_) throw std::bad_alloc();
    XXH3_64bits_reset(state_.get());
  }
  void update(const void* p, std::uint64_t n) { XXH3_64bits_update(state_.get(), p, static_cast<std::size_t>(n)); }
  std::uint64_t digest() const { return XXH3_64bits_digest(state_.get()); }

 private:
  struct Free {
    void operator()(XXH3_state_t* s) const noexcept { XXH3_freeState(s); }
  };
  std::unique_ptr<XXH3_state_t, Free> state_;
};

struct Source {
  const TensorInfo* tensor;
  std::uint64_t run_offset;
  bool rows;  ///< read in rows by a run (the embedding, lm_head, a dense layer's FFN): a checksum per row when raw
};

/// Whether a run reads `e` in pieces of rows rather than whole: the embedding's rows, lm_head
/// and a split dense layer's FFN in row chunks (streaming/row_chunks.hpp).
bool read_in_rows(const table::Entry& e) {
  return e.form == table::Form::matrix &&
         (e.part == TensorPart::embedding || e.part == TensorPart::head || e.part == TensorPart::dense_ffn);
}

struct PlannedRun {
  PackedRun run;
  std::vector<Source> sources;  ///< in run order
};

/// Lays out the runs: layers range.first..range.last first (each layer's trunk tensors,
/// checked against the tensor table), then, for the whole trunk (`whole`), the globals
/// (embedding, output head) one run each, in table order.
std::vector<PlannedRun> plan_runs(const CheckpointIndex& index, const ModelConfig& config, TrunkLayerRange range,
                                  bool whole) {
  const auto n_layers = static_cast<std::size_t>(range.last - range.first + 1);
  using Item = std::pair<const TensorInfo*, bool>;  // the tensor, read in rows
  std::vector<std::vector<Item>> layers(n_layers);
  std::vector<Item> globals;
  for (std::size_t i = 0; i < n_layers; ++i)
    table::for_each_layer_tensor(config, range.first + static_cast<std::int64_t>(i),
                                 [&](const table::Entry& e, const auto&) {
      layers[i].emplace_back(&table::require(index, e), read_in_rows(e));
    });
  auto global = [&](const table::Entry& e, const auto&) {
    globals.emplace_back(&table::require(index, e), read_in_rows(e));
  };
  if (whole) {
    table::for_each_embedding_tensor(config, global);
    table::for_each_head_tensor(config, global);
  }
  auto by_position = [](const Item& a, const Item& b) {
    return a.first->file != b.first->file ? a.first->file < b.first->file : a.first->offset < b.first->offset;
  };

  std::vector<PlannedRun> runs;
  auto add_run = [&](std::int64_t layer, std::string name, std::vector<Item> tensors) {
    std::sort(tensors.begin(), tensors.end(), by_position);
    PlannedRun p;
    p.run.layer = layer;
    p.run.name = std::move(name);
    std::uint64_t inside = 0;
    for (const auto& [t, rows] : tensors) {
      inside = align_up(inside, kTrunkTensorAlign);
      p.run.tensors.push_back({t->name, t->dtype, t->shape, inside, t->nbytes});
      p.sources.push_back({t, inside, rows});
      inside += t->nbytes;
    }
    p.run.nbytes = inside;  // placed in trunk.bin while it is written
    runs.push_back(std::move(p));
  };
  for (std::size_t i = 0; i < n_layers; ++i) {
    const std::int64_t layer = range.first + static_cast<std::int64_t>(i);
    add_run(layer, "layer " + std::to_string(layer), std::move(layers[i]));
  }
  for (const Item& g : globals) add_run(-1, g.first->name, {g});
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

/// The layers to pack: options.layers, checked against the checkpoint (UsageError naming
/// --layers), or all of them.
TrunkLayerRange layer_range(const PackTrunkOptions& options, const ModelConfig& config) {
  const std::int64_t n = config.num_hidden_layers;
  if (!options.layers) return {0, n - 1};
  const TrunkLayerRange r = *options.layers;
  const std::string given = "--layers " + std::to_string(r.first) + "-" + std::to_string(r.last);
  if (r.first < 0 || r.last < r.first) throw UsageError(given + ": not a range of layers (A-B with 0 <= A <= B)");
  if (r.last >= n)
    throw UsageError(given + ": " + options.model.string() + " has " + std::to_string(n) + " layers (0-" +
                     std::to_string(n - 1) + ")");
  return r;
}

nlohmann::json run_json(const PackedRun& run) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& t : run.tensors) {
    nlohmann::json tj = {{"name", t.name},  {"dtype", to_string(t.dtype)}, {"shape", t.shape},
                         {"off", t.offset}, {"nbytes", t.nbytes},          {"xxh3", hex64(t.xxh3)}};
    if (run.coded()) {
      tj["coded_off"] = t.coded_offset;
      tj["coded_bytes"] = t.coded_bytes;
    }
    if (t.row_sums >= 0) tj["row_sums"] = t.row_sums;
    tensors.push_back(std::move(tj));
  }
  nlohmann::json j = {{"file_off", run.file_offset},
                      {"nbytes", run.nbytes},
                      {"xxh3", hex64(run.xxh3)},
                      {"tensors", std::move(tensors)}};
  if (run.coded()) j["coded_bytes"] = run.coded_bytes;
  if (run.layer >= 0)
    j["layer"] = run.layer;
  else
    j["name"] = run.name;
  return j;
}

/// The folder pack-trunk writes: OUT, refused when it overlaps the checkpoint or is a folder
/// it did not write (or exists without `force`); its parent is made.
fs::path checked_target(const PackTrunkOptions& options) {
  const fs::path out = options.out.has_filename() ? options.out : options.out.parent_path();
  refuse_overlap(options.model, out);
  if (fs::exists(out) && !options.force)
    throw UsageError(out.string() + ": already exists (use --force to replace it)");
  if (fs::exists(out) && !(fs::is_directory(out) && (fs::is_empty(out) || written_by_pack_trunk(out))))
    throw UsageError(out.string() +
                     ": not a folder pack-trunk wrote (only trunk.bin and trunk.json); --force "
                     "replaces only those");
  if (out.has_parent_path()) fs::create_directories(out.parent_path());
  return out;
}

/// Writes the runs into trunk.bin, one after the other, hashing each as it goes: a raw run's
/// tensors copied (the rows of a tensor read in rows hashed one by one into the row table),
/// a coded run's tensors coded back to back. A coded run's offsets in trunk.bin depend on the
/// sizes of the runs coded before it, so every run is placed here.
class RunWriter {
 public:
  RunWriter(const CheckpointIndex& index, sdk::StorageBackend& storage, AtomicFile& bin,
            const PackTrunkOptions& options, io::trunk_codec::Codec codec, std::uint64_t data_bytes)
      : index_(index),
        storage_(storage),
        bin_(bin),
        options_(options),
        data_bytes_(data_bytes),
        buffer_(static_cast<std::size_t>(std::min<std::uint64_t>(io::trunk_format::kChunk, data_bytes + 1))) {
    if (codec != io::trunk_codec::Codec::none)
      encoder_ = std::make_unique<io::trunk_codec::Encoder>(
          io::trunk_codec::EncodeOptions{io::trunk_codec::kDefaultBlockRaw, options.codec_level,
                                         io::trunk_codec::kDefaultMinMatch,
                                         codec == io::trunk_codec::Codec::bf16_huff});
    phase_ = encoder_ ? "code" : "copy";  // one phase for every run (the progress line restarts per phase)
  }

  /// Places `p` at `cursor` and writes it; returns the cursor after its padded bytes.
  std::uint64_t write(PlannedRun& p, std::uint64_t cursor) {
    p.run.file_offset = cursor;
    if (!encoder_ || p.run.layer < 0)
      raw(p);  // raw: global runs always (read in pieces)
    else
      coded(p);
    return cursor + p.run.padded_bytes();
  }

  /// The row table, XXH3-64 of every row of the tensors read in rows, in run order.
  [[nodiscard]] const std::vector<std::uint64_t>& row_sums() const noexcept { return row_sums_; }

 private:
  sdk::StorageFile& shard(std::uint32_t file) {
    auto& slot = shards_[file];
    if (!slot) {
      const std::string& path = index_.files()[file].uri;
      const sdk::Status st = storage_.open(path, slot);
      if (!st.ok()) throw RuntimeError(st.detail);
    }
    return *slot;
  }

  void advance(std::uint64_t n) {
    copied_ += n;
    if (options_.progress) options_.progress(phase_, copied_, data_bytes_);
  }

  void raw(PlannedRun& p) {
    Hasher stored;
    std::uint64_t position = 0;  // within the run
    for (std::size_t k = 0; k < p.sources.size(); ++k) {
      const Source& s = p.sources[k];
      PackedTensor& packed = p.run.tensors[k];
      stored.update(zeros_, s.run_offset - position);  // inter-tensor padding
      // A tensor read in rows is copied in pieces of whole rows, each row hashed.
      const std::uint64_t row =
          s.rows && !s.tensor->shape.empty() && s.tensor->shape[0] > 0 ? s.tensor->nbytes / s.tensor->shape[0] : 0;
      if (row > 0) packed.row_sums = static_cast<std::int64_t>(row_sums_.size());
      const std::uint64_t piece = row > 0 ? std::max<std::uint64_t>(1, buffer_.size() / row) * row : buffer_.size();
      if (piece > buffer_.size()) buffer_.resize(static_cast<std::size_t>(piece));
      Hasher whole;
      sdk::StorageFile& file = shard(s.tensor->file);
      for (std::uint64_t done = 0; done < s.tensor->nbytes;) {
        const std::uint64_t n = std::min<std::uint64_t>(s.tensor->nbytes - done, piece);
        sdk::ReadRequest request{s.tensor->offset + done, n, buffer_.data()};
        const sdk::Status st = file.read({&request, 1});
        if (!st.ok()) throw RuntimeError("reading tensor " + s.tensor->name + ": " + st.detail);
        stored.update(buffer_.data(), n);
        whole.update(buffer_.data(), n);
        for (std::uint64_t r = 0; row > 0 && r < n / row; ++r)
          row_sums_.push_back(XXH3_64bits(buffer_.data() + r * row, static_cast<std::size_t>(row)));
        bin_.pwrite(buffer_.data(), static_cast<std::size_t>(n), p.run.file_offset + s.run_offset + done);
        done += n;
        advance(n);
      }
      packed.xxh3 = whole.digest();
      position = s.run_offset + s.tensor->nbytes;
    }
    p.run.xxh3 = stored.digest();
  }

  /// Each tensor's coded stream, back to back at 64-byte alignment.
  void coded(PlannedRun& p) {
    Hasher coded;
    std::uint64_t coded_position = 0;
    for (std::size_t k = 0; k < p.sources.size(); ++k) {
      const Source& s = p.sources[k];
      tensor_.resize(static_cast<std::size_t>(s.tensor->nbytes));
      sdk::ReadRequest request{s.tensor->offset, s.tensor->nbytes, tensor_.data()};
      const sdk::Status st = shard(s.tensor->file).read({&request, 1});
      if (!st.ok()) throw RuntimeError("reading tensor " + s.tensor->name + ": " + st.detail);
      p.run.tensors[k].xxh3 = XXH3_64bits(tensor_.data(), tensor_.size());  // what it must decode to
      stream_.clear();
      encoder_->encode(tensor_, s.tensor->dtype, stream_);
      const std::uint64_t at = align_up(coded_position, kTrunkTensorAlign);
      coded.update(zeros_, at - coded_position);
      coded.update(stream_.data(), stream_.size());
      bin_.pwrite(stream_.data(), stream_.size(), p.run.file_offset + at);
      p.run.tensors[k].coded_offset = at;
      p.run.tensors[k].coded_bytes = stream_.size();
      coded_position = at + stream_.size();
      advance(s.tensor->nbytes);
    }
    p.run.coded_bytes = coded_position;
    p.run.xxh3 = coded.digest();
  }

  const CheckpointIndex& index_;
  sdk::StorageBackend& storage_;
  AtomicFile& bin_;
  const PackTrunkOptions& options_;
  std::uint64_t data_bytes_;
  std::map<std::uint32_t, std::unique_ptr<sdk::StorageFile>> shards_;
  std::vector<std::byte> buffer_, tensor_, stream_;
  std::unique_ptr<io::trunk_codec::Encoder> encoder_;
  const char* phase_ = "copy";
  const std::byte zeros_[kTrunkTensorAlign] = {};
  std::uint64_t copied_ = 0;
  std::vector<std::uint64_t> row_sums_;
};

/// Writes the row table (u64 little-endian checksums) at `cursor`; its run.
PackedRun write_row_table(AtomicFile& bin, const std::vector<std::uint64_t>& row_sums, std::uint64_t cursor) {
  std::vector<unsigned char> le(row_sums.size() * 8);
  for (std::size_t i = 0; i < row_sums.size(); ++i)
    for (std::size_t b = 0; b < 8; ++b) le[i * 8 + b] = static_cast<unsigned char>(row_sums[i] >> (8 * b));
  PackedRun table;
  table.name = "row table";
  table.file_offset = cursor;
  table.nbytes = le.size();
  table.xxh3 = XXH3_64bits(le.data(), le.size());
  if (!le.empty()) bin.pwrite(le.data(), le.size(), table.file_offset);
  return table;
}

/// Reads trunk.bin back through the same storage plugin, every run, tensor and row.
void verify_written(sdk::StorageBackend& storage, const fs::path& bin, const std::vector<PlannedRun>& runs,
                    const std::vector<std::uint64_t>& row_sums, const PackedRun& table, const PackTrunkResult& result,
                    const PackTrunkOptions& options) {
  std::unique_ptr<sdk::StorageFile> written;
  if (const sdk::Status st = storage.open(bin.string(), written); !st.ok()) throw RuntimeError(st.detail);
  if (written->size() != result.bin_bytes)
    throw RuntimeError(bin.string() + ": verification failed: " + std::to_string(written->size()) +
                       " bytes on disk, expected " + std::to_string(result.bin_bytes));
  std::uint64_t checked = 0;
  const auto progress = [&](std::uint64_t n) {
    checked += n;
    if (options.progress) options.progress("verify", checked, result.stored_bytes);
  };
  try {
    for (const auto& p : runs) io::trunk_format::verify_run(*written, bin.string(), p.run, row_sums, progress);
    if (io::trunk_format::hash_range(*written, bin.string(), table.file_offset, table.nbytes) != table.xxh3)
      throw RuntimeError(bin.string() + ": the row table reads back differently");
  } catch (const RuntimeError& e) {
    throw RuntimeError(std::string("verification failed: ") + e.what());
  }
}

/// trunk.json (k3/packed_trunk.hpp).
nlohmann::json manifest_json(const std::vector<PlannedRun>& runs, const PackedRun& table, std::size_t row_sums,
                             io::trunk_codec::Codec codec, const PackTrunkResult& result,
                             const PackTrunkOptions& options, const ModelConfig& config, TrunkLayerRange range) {
  nlohmann::json layers = nlohmann::json::array();
  nlohmann::json globals = nlohmann::json::array();
  for (const auto& p : runs) (p.run.layer >= 0 ? layers : globals).push_back(run_json(p.run));
  return {{"format", io::trunk_format::kFormat},
          {"version", io::trunk_format::kVersion},
          {"align", kTrunkAlign},
          {"codec", std::string(io::trunk_codec::name(codec))},
          {"checkpoint_identity", identity_hex(result.identity)},
          {"model", fs::absolute(options.model).lexically_normal().string()},
          {"trunk_bin_bytes", result.bin_bytes},
          {"n_layers", config.num_hidden_layers},
          {"layer_range", {range.first, range.last}},
          {"row_sums", {{"file_off", table.file_offset}, {"count", row_sums}, {"xxh3", hex64(table.xxh3)}}},
          {"layers", std::move(layers)},
          {"globals", std::move(globals)}};
}

}  // namespace

PackTrunkResult pack_trunk(const PackTrunkOptions& options) {
  if (!fs::is_directory(options.model)) throw UsageError(options.model.string() + ": no such checkpoint directory");
  PluginHost host;
  auto storage = host.create_storage(options.storage, {});
  const ModelConfig config = read_model_config(*storage, options.model.string());
  const CheckpointIndex index = CheckpointIndex::open(*storage, options.model.string());
  const TrunkLayerRange range = layer_range(options, config);
  const fs::path out = checked_target(options);

  io::trunk_codec::Codec codec = io::trunk_codec::Codec::none;
  if (!io::trunk_codec::parse_codec(options.codec, codec))
    throw UsageError("unknown codec '" + options.codec + "' (known: " + io::trunk_codec::known_codecs() + ")");

  std::vector<PlannedRun> runs = plan_runs(index, config, range, !options.layers.has_value());
  PackTrunkResult result;
  result.identity = checkpoint_identity(config, index);
  for (const auto& p : runs) {
    result.data_bytes += p.run.nbytes;
    result.tensors += p.run.tensors.size();
  }
  result.runs = runs.size();

  TempDir temp(out);
  const fs::path bin = temp.path() / "trunk.bin";
  // The runs, then the row table after them.
  std::vector<std::uint64_t> row_sums;
  PackedRun table;
  {
    AtomicFile out_bin(bin);
    RunWriter writer(index, *storage, out_bin, options, codec, result.data_bytes);
    std::uint64_t cursor = 0;
    for (auto& p : runs) {
      cursor = writer.write(p, cursor);
      result.stored_bytes += p.run.stored_bytes();
    }
    row_sums = writer.row_sums();
    table = write_row_table(out_bin, row_sums, cursor);
    cursor += table.padded_bytes();
    result.row_sums = row_sums.size();
    result.bin_bytes = cursor;
    out_bin.resize(result.bin_bytes);
    out_bin.commit();
  }
  verify_written(*storage, bin, runs, row_sums, table, result, options);
  // The manifest last: its presence marks a finished trunk.
  write_file_atomically(temp.path() / "trunk.json",
                        manifest_json(runs, table, row_sums.size(), codec, result, options, config, range).dump(1) +
                            "\n");

  temp.commit(written_by_pack_trunk);
  result.dir = out;
  return result;
}

}  // namespace k3
