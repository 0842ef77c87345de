// PackedTrunk::open: reads and validates trunk.json against trunk.bin (see k3/packed_trunk.hpp),
// refuses a pack of another checkpoint, and reads and checks the row table.
// Untrusted input: every offset and size is checked before anyone forms a pointer from it.
#include "io/xxh3.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include <k3/error.hpp>
#include <k3/json_depth.hpp>
#include <k3/packed_trunk.hpp>
#include <k3/storage.hpp>

#include "io/pack_trunk_codec.hpp"
#include "io/pack_trunk_format.hpp"
#include "io/small_file.hpp"
#include "io/uri.hpp"

namespace k3 {
namespace {

using nlohmann::json;

// trunk.json lists a few thousand tensors; far below this.
constexpr std::uint64_t kMaxManifest = std::uint64_t{256} << 20;

class Reader {
 public:
  explicit Reader(std::string manifest) : manifest_(std::move(manifest)) {}

  [[noreturn]] void fail(const std::string& what) const { throw UsageError(manifest_ + ": " + what); }

  const json& member(const json& obj, const char* key, const std::string& where) const {
    if (!obj.is_object()) fail(where + ": expected an object");
    const auto it = obj.find(key);
    if (it == obj.end()) fail(where + ": missing \"" + key + "\"");
    return *it;
  }
  std::uint64_t u64(const json& obj, const char* key, const std::string& where) const {
    const json& v = member(obj, key, where);
    if (!v.is_number_unsigned()) fail(where + ": \"" + key + "\" must be a non-negative integer");
    return v.get<std::uint64_t>();
  }
  std::string str(const json& obj, const char* key, const std::string& where) const {
    const json& v = member(obj, key, where);
    if (!v.is_string()) fail(where + ": \"" + key + "\" must be a string");
    return v.get<std::string>();
  }
  std::uint64_t hex(const json& obj, const char* key, const std::string& where) const {
    std::uint64_t out = 0;
    if (!io::trunk_format::parse_hex64(str(obj, key, where), out))
      fail(where + ": \"" + key + "\" must be 16 hex digits");
    return out;
  }

  /// `coded_pack`: the trunk has a codec, so a run may be coded (it has "coded_bytes").
  /// `row_count`: the entries of the row table, which "row_sums" indices must lie inside.
  PackedRun run(const json& j, const std::string& where, std::uint64_t bin_bytes, bool coded_pack,
                std::uint64_t row_count) const {
    PackedRun r;
    r.file_offset = u64(j, "file_off", where);
    r.nbytes = u64(j, "nbytes", where);
    r.xxh3 = hex(j, "xxh3", where);
    if (j.is_object() && j.contains("coded_bytes")) {
      if (!coded_pack) fail(where + ": \"coded_bytes\" in a trunk without a codec");
      r.coded_bytes = u64(j, "coded_bytes", where);
      if (r.coded_bytes == 0) fail(where + ": \"coded_bytes\" must be positive");
    }
    if (r.file_offset % kTrunkAlign != 0)
      fail(where + ": file_off " + std::to_string(r.file_offset) + " is not 4096-aligned");
    if (r.file_offset > bin_bytes || r.stored_bytes() > bin_bytes - r.file_offset)
      fail(where + ": run [" + std::to_string(r.file_offset) + ", +" + std::to_string(r.stored_bytes()) +
           ") lies outside trunk.bin (" + std::to_string(bin_bytes) + " bytes)");
    const json& tensors = member(j, "tensors", where);
    if (!tensors.is_array() || tensors.empty()) fail(where + ": \"tensors\" must be a non-empty array");
    for (const json& t : tensors) {
      PackedTensor p;
      p.name = str(t, "name", where);
      const std::string tw = where + " tensor " + p.name;
      if (!io::trunk_format::parse_dtype(str(t, "dtype", tw), p.dtype)) fail(tw + ": unknown dtype");
      const json& shape = member(t, "shape", tw);
      if (!shape.is_array()) fail(tw + ": \"shape\" must be an array");
      std::uint64_t elements = 1;
      for (const json& d : shape) {
        if (!d.is_number_unsigned()) fail(tw + ": shape entries must be non-negative integers");
        const auto v = d.get<std::uint64_t>();
        if (v != 0 && elements > UINT64_MAX / v) fail(tw + ": shape overflows");
        elements *= v;
        p.shape.push_back(v);
      }
      p.offset = u64(t, "off", tw);
      p.nbytes = u64(t, "nbytes", tw);
      if (elements > UINT64_MAX / element_size(p.dtype) || elements * element_size(p.dtype) != p.nbytes)
        fail(tw + ": shape x dtype is not " + std::to_string(p.nbytes) + " bytes");
      if (p.offset > r.nbytes || p.nbytes > r.nbytes - p.offset)
        fail(tw + ": [" + std::to_string(p.offset) + ", +" + std::to_string(p.nbytes) + ") lies outside its run (" +
             std::to_string(r.nbytes) + " bytes)");
      p.xxh3 = hex(t, "xxh3", tw);
      if (t.is_object() && t.contains("row_sums")) row_sums(t, tw, r, row_count, p);
      if (r.coded()) coded_tensor(t, tw, r, p);
      r.tensors.push_back(std::move(p));
    }
    return r;
  }

  /// A tensor read in rows: 2-D, stored raw, its rows' checksums inside the row table.
  void row_sums(const json& t, const std::string& tw, const PackedRun& r, std::uint64_t row_count,
                PackedTensor& p) const {
    const std::uint64_t first = u64(t, "row_sums", tw);
    if (r.coded()) fail(tw + ": \"row_sums\" in a coded run (coded tensors are read whole)");
    if (p.shape.size() != 2 || p.shape[0] == 0) fail(tw + ": \"row_sums\" on a tensor that is not a matrix of rows");
    if (first > row_count || p.shape[0] > row_count - first)
      fail(tw + ": row checksums [" + std::to_string(first) + ", +" + std::to_string(p.shape[0]) +
           ") lie outside the row table (" + std::to_string(row_count) + " entries)");
    p.row_sums = static_cast<std::int64_t>(first);
  }

  /// A coded run's tensors lie back to back (64-byte aligned, in order) both decoded and
  /// coded, the run ending with the last: so sizes are bounded by trunk.bin (a stream
  /// decodes to at most twice its bytes) and a whole layer's streams are one span.
  void coded_tensor(const json& t, const std::string& tw, const PackedRun& r, PackedTensor& p) const {
    p.coded_offset = u64(t, "coded_off", tw);
    p.coded_bytes = u64(t, "coded_bytes", tw);
    const auto next = [](std::uint64_t end) {
      return (end + kTrunkTensorAlign - 1) / kTrunkTensorAlign * kTrunkTensorAlign;
    };
    const PackedTensor* prev = r.tensors.empty() ? nullptr : &r.tensors.back();
    if (p.offset != (prev ? next(prev->offset + prev->nbytes) : 0))
      fail(tw + ": \"off\" " + std::to_string(p.offset) +
           " does not follow the previous tensor (a coded run's tensors lie "
           "back to back, 64-byte aligned)");
    if (p.coded_offset != (prev ? next(prev->coded_offset + prev->coded_bytes) : 0))
      fail(tw + ": \"coded_off\" " + std::to_string(p.coded_offset) + " does not follow the previous tensor's stream");
    if (p.coded_bytes < io::trunk_codec::kHeaderBytes || p.coded_offset > r.coded_bytes ||
        p.coded_bytes > r.coded_bytes - p.coded_offset)
      fail(tw + ": coded stream [" + std::to_string(p.coded_offset) + ", +" + std::to_string(p.coded_bytes) +
           ") lies outside its coded run (" + std::to_string(r.coded_bytes) + " bytes) or is too short");
    if (p.nbytes / 2 > p.coded_bytes)
      fail(tw + ": " + std::to_string(p.nbytes) + " bytes cannot decode from a stream of " +
           std::to_string(p.coded_bytes));
  }

  /// After the tensors of a coded run: the run ends with its last tensor and stream.
  void coded_run_end(const PackedRun& r, const std::string& where) const {
    const PackedTensor& last = r.tensors.back();
    if (r.nbytes != last.offset + last.nbytes || r.coded_bytes != last.coded_offset + last.coded_bytes)
      fail(where + ": a coded run must end with its last tensor (nbytes " + std::to_string(r.nbytes) +
           ", coded_bytes " + std::to_string(r.coded_bytes) + ")");
  }

 private:
  std::string manifest_;
};

/// The layers trunk.json says it holds, [first, last]: its "layer_range" (0..n-1 when it
/// has none: written before ranges), which must be as many layers as `listed` and lie
/// inside its "n_layers" and, when `model_layers` >= 0, inside this run's checkpoint.
std::pair<std::uint64_t, std::uint64_t> layer_range(const Reader& rd, const json& j, std::uint64_t listed,
                                                    std::int64_t model_layers) {
  std::uint64_t first = 0, last = listed - 1;
  if (j.contains("layer_range")) {
    const json& r = j["layer_range"];
    if (!r.is_array() || r.size() != 2 || !r[0].is_number_unsigned() || !r[1].is_number_unsigned() ||
        r[1].get<std::uint64_t>() < r[0].get<std::uint64_t>())
      rd.fail("\"layer_range\" must be [first, last], two layer numbers with first <= last");
    first = r[0].get<std::uint64_t>();
    last = r[1].get<std::uint64_t>();
    if (last - first + 1 != listed)
      rd.fail("\"layer_range\" [" + std::to_string(first) + ", " + std::to_string(last) + "] is " +
              std::to_string(last - first + 1) + " layers, \"layers\" lists " + std::to_string(listed));
  }
  const auto range = [&] { return "layers " + std::to_string(first) + "-" + std::to_string(last); };
  if (j.contains("n_layers")) {
    const std::uint64_t n = rd.u64(j, "n_layers", "top level");
    if (last >= n) rd.fail(range() + " packed, but \"n_layers\" is " + std::to_string(n));
    if (model_layers >= 0 && n != static_cast<std::uint64_t>(model_layers))
      rd.fail("packed from a checkpoint of " + std::to_string(n) + " layers; this run's has " +
              std::to_string(model_layers));
  }
  if (model_layers >= 0 && last >= static_cast<std::uint64_t>(model_layers))
    rd.fail(range() + " packed, but this run's checkpoint has " + std::to_string(model_layers) + " layers (0-" +
            std::to_string(model_layers - 1) + ")");
  return {first, last};
}

/// trunk.json parsed, or a one-line refusal: no folder, no manifest (an unfinished pack),
/// too deep, not JSON. Apart from PackedTrunk::open: reading the file is one step.
json read_manifest(sdk::StorageBackend& storage, const std::string& uri, const std::string& manifest,
                   const Reader& rd) {
  const auto manifest_file = io::open_file(storage, manifest, "trunk.json", true);
  if (!manifest_file) {
    std::vector<std::string> names;
    if (storage.list(uri, names).code == sdk::StatusCode::not_found)
      throw UsageError(uri + ": no such packed trunk folder");
    throw UsageError(uri +
                     ": no trunk.json: not a finished packed trunk (an interrupted pack-trunk?); "
                     "run k3host pack-trunk again");
  }
  json j;
  const simdjson::padded_string text = io::read_whole(*manifest_file, manifest, kMaxManifest);
  if (const auto deep = sdk::json_too_deep({text.data(), text.size()}))
    throw UsageError(sdk::json_depth_message(manifest, *deep));
  try {
    j = json::parse(std::string_view(text.data(), text.size()));
  } catch (const json::exception& e) {
    rd.fail(std::string("not valid JSON (a damaged or partial trunk; run k3host pack-trunk again): ") + e.what());
  }
  return j;
}

/// The manifest's "format", "version" (an older one is named as such) and "align".
void check_format(const Reader& rd, const json& j) {
  if (rd.str(j, "format", "top level") != io::trunk_format::kFormat) rd.fail("\"format\" is not k3host-trunk");
  const std::uint64_t version = rd.u64(j, "version", "top level");
  if (version == 1 || version == 2)
    rd.fail("version " + std::to_string(version) +
            ", written by an older k3host (XXH64 per run only, no checkpoint "
            "identity), so its bytes cannot be checked as they are read nor tied to this checkpoint; this k3host reads "
            "version " +
            std::to_string(io::trunk_format::kVersion) + ": repack it with k3host pack-trunk");
  if (version != static_cast<std::uint64_t>(io::trunk_format::kVersion))
    rd.fail("unsupported version " + std::to_string(version) + " (this k3host reads version " +
            std::to_string(io::trunk_format::kVersion) + ")");
  if (rd.u64(j, "align", "top level") != kTrunkAlign) rd.fail("\"align\" must be 4096");
}

/// A pack holds the bytes of one checkpoint: any other, of the same architecture or not (a
/// fine-tune, a new revision), is refused before a byte of trunk.bin is used.
void check_identity(const Reader& rd, const json& j, std::uint64_t identity, std::uint64_t expected_identity,
                    std::string_view model) {
  if (identity == expected_identity) return;
  const std::string packed_from = j.contains("model") && j["model"].is_string() ? j["model"].get<std::string>() : "?";
  rd.fail("packed from checkpoint " + packed_from + " (checkpoint identity " + identity_hex(identity) +
          "), but this run's checkpoint" + (model.empty() ? std::string() : " " + std::string(model)) +
          " has identity " + identity_hex(expected_identity) +
          ": a packed trunk holds one checkpoint's bytes; pack this one with k3host pack-trunk");
}

/// Where the row table lies ("row_sums": offset, count, hash), checked to lie inside
/// trunk.bin; its bytes are read once the runs are checked (read_row_sums).
PackedRun row_table_of(const Reader& rd, const json& j, std::uint64_t bin_bytes, std::uint64_t& row_count) {
  const json& rows = rd.member(j, "row_sums", "top level");
  PackedRun table;
  table.name = "row table";
  table.file_offset = rd.u64(rows, "file_off", "row_sums");
  row_count = rd.u64(rows, "count", "row_sums");
  table.xxh3 = rd.hex(rows, "xxh3", "row_sums");
  if (table.file_offset % kTrunkAlign != 0) rd.fail("row_sums: file_off is not 4096-aligned");
  if (table.file_offset > bin_bytes || row_count > (bin_bytes - table.file_offset) / 8)
    rd.fail("row_sums: " + std::to_string(row_count) + " checksums at " + std::to_string(table.file_offset) +
            " lie outside trunk.bin (" + std::to_string(bin_bytes) + " bytes)");
  table.nbytes = row_count * 8;
  return table;
}

/// Runs (and the row table) must not overlap (each owns its padded span).
void check_no_overlap(const Reader& rd, const std::vector<PackedRun>& layers, const std::vector<PackedRun>& globals,
                      const PackedRun& table, std::uint64_t row_count) {
  std::vector<const PackedRun*> all;
  for (const auto& r : layers) all.push_back(&r);
  for (const auto& r : globals) all.push_back(&r);
  if (row_count > 0) all.push_back(&table);
  std::sort(all.begin(), all.end(),
            [](const PackedRun* a, const PackedRun* b) { return a->file_offset < b->file_offset; });
  for (std::size_t i = 1; i < all.size(); ++i)
    if (all[i - 1]->file_offset + all[i - 1]->stored_bytes() > all[i]->file_offset)
      rd.fail("runs '" + all[i - 1]->name + "' and '" + all[i]->name + "' overlap");
}

/// The row checksums are bytes of the pack like any other: checked against the table's
/// hash before use, then read as little-endian u64s.
std::vector<std::uint64_t> read_row_sums(sdk::StorageFile& bin_file, const std::string& bin, const PackedRun& table,
                                         std::uint64_t row_count) {
  std::vector<unsigned char> raw(static_cast<std::size_t>(table.nbytes));
  io::read_exact(bin_file, table.file_offset, table.nbytes, raw.data(), bin);
  if (const std::uint64_t h = XXH3_64bits(raw.data(), raw.size()); h != table.xxh3)
    throw RuntimeError(bin + ": the row table (" + std::to_string(row_count) + " checksums at offset " +
                       std::to_string(table.file_offset) + ") has xxh3 " + io::trunk_format::hex64(h) +
                       ", trunk.json says " + io::trunk_format::hex64(table.xxh3) +
                       ": the packed trunk is damaged (repack it with k3host pack-trunk)");
  std::vector<std::uint64_t> sums(static_cast<std::size_t>(row_count));
  for (std::size_t i = 0; i < sums.size(); ++i) {
    std::uint64_t v = 0;
    for (int b = 7; b >= 0; --b) v = (v << 8) | raw[i * 8 + static_cast<std::size_t>(b)];
    sums[i] = v;
  }
  return sums;
}

}  // namespace

const PackedTensor* PackedRun::find(std::string_view tensor) const {
  for (const auto& t : tensors)
    if (t.name == tensor) return &t;
  return nullptr;
}

const PackedRun* PackedTrunk::global(std::string_view tensor) const {
  for (const auto& r : globals_)
    if (r.find(tensor) != nullptr) return &r;
  return nullptr;
}

std::string PackedTrunk::bin_uri() const { return io::join_uri(uri_, "trunk.bin"); }

PackedTrunk PackedTrunk::open(sdk::StorageBackend& storage, const std::string& uri, std::uint64_t expected_identity,
                              std::string_view model, std::int64_t model_layers) {
  const std::string manifest = io::join_uri(uri, "trunk.json");
  const Reader rd(manifest);
  const json j = read_manifest(storage, uri, manifest, rd);
  check_format(rd, j);

  PackedTrunk t;
  t.uri_ = uri;
  io::trunk_codec::Codec codec = io::trunk_codec::Codec::none;
  if (const std::string name = rd.str(j, "codec", "top level"); !io::trunk_codec::parse_codec(name, codec))
    rd.fail("unknown codec \"" + name + "\" (this k3host reads " + io::trunk_codec::known_codecs() + ")");
  t.codec_ = std::string(io::trunk_codec::name(codec));
  const bool coded_pack = codec != io::trunk_codec::Codec::none;
  t.identity_ = rd.hex(j, "checkpoint_identity", "top level");
  check_identity(rd, j, t.identity_, expected_identity, model);
  t.bin_bytes_ = rd.u64(j, "trunk_bin_bytes", "top level");
  const std::string bin = t.bin_uri();
  const auto bin_file = io::open_file(storage, bin, "trunk.bin");
  if (const std::uint64_t actual = bin_file->size(); actual != t.bin_bytes_)
    throw UsageError(bin + ": " + std::to_string(actual) + " bytes, trunk.json says " + std::to_string(t.bin_bytes_));

  // The row table: where it lies, then (after the runs are checked) its bytes.
  std::uint64_t row_count = 0;
  const PackedRun table = row_table_of(rd, j, t.bin_bytes_, row_count);

  const json& layers = rd.member(j, "layers", "top level");
  if (!layers.is_array() || layers.empty()) rd.fail("\"layers\" must be a non-empty array");
  const auto [first, last] = layer_range(rd, j, layers.size(), model_layers);
  t.model_layers_ = j.contains("n_layers") ? static_cast<std::int64_t>(rd.u64(j, "n_layers", "top level"))
                                           : model_layers;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string where = "layers[" + std::to_string(i) + "]";
    PackedRun r = rd.run(layers[i], where, t.bin_bytes_, coded_pack, row_count);
    if (r.coded()) rd.coded_run_end(r, where);
    const std::uint64_t layer = first + i;
    if (rd.u64(layers[i], "layer", where) != layer) rd.fail(where + ": \"layer\" must be " + std::to_string(layer));
    r.layer = static_cast<std::int64_t>(layer);
    r.name = "layer " + std::to_string(layer);
    t.layers_.push_back(std::move(r));
  }
  const json& globals = rd.member(j, "globals", "top level");
  if (!globals.is_array()) rd.fail("\"globals\" must be an array");
  // A partial pack (some layers only) leaves the globals to the shards too.
  t.partial_ = first != 0 || (t.model_layers_ >= 0 && last + 1 != static_cast<std::uint64_t>(t.model_layers_));
  if (t.partial_ && !globals.empty())
    rd.fail("a pack of layers " + std::to_string(first) + "-" + std::to_string(last) +
            " only (\"layer_range\") "
            "has global runs: pack-trunk --layers writes none");
  for (std::size_t i = 0; i < globals.size(); ++i) {
    const std::string where = "globals[" + std::to_string(i) + "]";
    PackedRun r = rd.run(globals[i], where, t.bin_bytes_, coded_pack, row_count);
    if (r.coded()) rd.coded_run_end(r, where);
    r.name = rd.str(globals[i], "name", where);
    t.globals_.push_back(std::move(r));
  }
  check_no_overlap(rd, t.layers_, t.globals_, table, row_count);
  t.row_sums_ = read_row_sums(*bin_file, bin, table, row_count);
  return t;
}

void PackedTrunk::verify_hashes(sdk::StorageBackend& storage) const {
  std::unique_ptr<sdk::StorageFile> file;
  if (const sdk::Status st = storage.open(bin_uri(), file); !st.ok()) throw RuntimeError(st.detail);
  for (const auto* runs : {&layers_, &globals_})
    for (const auto& r : *runs) io::trunk_format::verify_run(*file, bin_uri(), r, row_sums_);
}

}  // namespace k3
