// PackedTrunk::open: reads and validates trunk.json against trunk.bin (see pack_trunk.hpp).
// Untrusted input: every offset and size is checked before anyone forms a pointer from it.
#include <algorithm>

#include <nlohmann/json.hpp>

#include <k3/error.hpp>
#include <k3/json_depth.hpp>
#include <k3/pack_trunk.hpp>
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
    if (!trunk_format::parse_hex64(str(obj, key, where), out)) fail(where + ": \"" + key + "\" must be 16 hex digits");
    return out;
  }

  /// `coded_pack`: the trunk has a codec, so a run may be coded (it has "coded_bytes").
  PackedRun run(const json& j, const std::string& where, std::uint64_t bin_bytes, bool coded_pack) const {
    PackedRun r;
    r.file_offset = u64(j, "file_off", where);
    r.nbytes = u64(j, "nbytes", where);
    r.xxh64 = hex(j, "xxh64", where);
    if (j.is_object() && j.contains("coded_bytes")) {
      if (!coded_pack) fail(where + ": \"coded_bytes\" in a trunk without a codec");
      r.coded_bytes = u64(j, "coded_bytes", where);
      if (r.coded_bytes == 0) fail(where + ": \"coded_bytes\" must be positive");
      r.raw_xxh64 = hex(j, "raw_xxh64", where);
    }
    if (r.file_offset % kTrunkAlign != 0) fail(where + ": file_off " + std::to_string(r.file_offset) + " is not 4096-aligned");
    if (r.file_offset > bin_bytes || r.stored_bytes() > bin_bytes - r.file_offset)
      fail(where + ": run [" + std::to_string(r.file_offset) + ", +" + std::to_string(r.stored_bytes()) +
           ") lies outside trunk.bin (" + std::to_string(bin_bytes) + " bytes)");
    const json& tensors = member(j, "tensors", where);
    if (!tensors.is_array() || tensors.empty()) fail(where + ": \"tensors\" must be a non-empty array");
    for (const json& t : tensors) {
      PackedTensor p;
      p.name = str(t, "name", where);
      const std::string tw = where + " tensor " + p.name;
      if (!trunk_format::parse_dtype(str(t, "dtype", tw), p.dtype)) fail(tw + ": unknown dtype");
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
      if (r.coded()) coded_tensor(t, tw, r, p);
      r.tensors.push_back(std::move(p));
    }
    return r;
  }

  /// A coded run's tensors lie back to back (64-byte aligned, in order) both decoded and
  /// coded, the run ending with the last: so sizes are bounded by trunk.bin (a stream
  /// decodes to at most twice its bytes) and a whole layer's streams are one span.
  void coded_tensor(const json& t, const std::string& tw, const PackedRun& r, PackedTensor& p) const {
    p.coded_offset = u64(t, "coded_off", tw);
    p.coded_bytes = u64(t, "coded_bytes", tw);
    const auto next = [](std::uint64_t end) { return (end + kTrunkTensorAlign - 1) / kTrunkTensorAlign * kTrunkTensorAlign; };
    const PackedTensor* prev = r.tensors.empty() ? nullptr : &r.tensors.back();
    if (p.offset != (prev ? next(prev->offset + prev->nbytes) : 0))
      fail(tw + ": \"off\" " + std::to_string(p.offset) + " does not follow the previous tensor (a coded run's tensors lie "
           "back to back, 64-byte aligned)");
    if (p.coded_offset != (prev ? next(prev->coded_offset + prev->coded_bytes) : 0))
      fail(tw + ": \"coded_off\" " + std::to_string(p.coded_offset) + " does not follow the previous tensor's stream");
    if (p.coded_bytes < trunk_codec::kHeaderBytes || p.coded_offset > r.coded_bytes ||
        p.coded_bytes > r.coded_bytes - p.coded_offset)
      fail(tw + ": coded stream [" + std::to_string(p.coded_offset) + ", +" + std::to_string(p.coded_bytes) +
           ") lies outside its coded run (" + std::to_string(r.coded_bytes) + " bytes) or is too short");
    if (p.nbytes / 2 > p.coded_bytes)
      fail(tw + ": " + std::to_string(p.nbytes) + " bytes cannot decode from a stream of " + std::to_string(p.coded_bytes));
  }

  /// After the tensors of a coded run: the run ends with its last tensor and stream.
  void coded_run_end(const PackedRun& r, const std::string& where) const {
    const PackedTensor& last = r.tensors.back();
    if (r.nbytes != last.offset + last.nbytes || r.coded_bytes != last.coded_offset + last.coded_bytes)
      fail(where + ": a coded run must end with its last tensor (nbytes " + std::to_string(r.nbytes) + ", coded_bytes " +
           std::to_string(r.coded_bytes) + ")");
  }

 private:
  std::string manifest_;
};

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

PackedTrunk PackedTrunk::open(sdk::StorageBackend& storage, const std::string& uri, std::uint64_t expected_fingerprint) {
  const std::string manifest = io::join_uri(uri, "trunk.json");
  const auto manifest_file = io::open_file(storage, manifest, "trunk.json", true);
  if (!manifest_file) {
    std::vector<std::string> names;
    if (storage.list(uri, names).code == sdk::StatusCode::not_found)
      throw UsageError(uri + ": no such packed trunk folder");
    throw UsageError(uri + ": no trunk.json: not a finished packed trunk (an interrupted pack-trunk?); "
                           "run k3host pack-trunk again");
  }
  const Reader rd(manifest);
  json j;
  {
    const simdjson::padded_string text = io::read_whole(*manifest_file, manifest, kMaxManifest);
    if (const auto deep = sdk::json_too_deep({text.data(), text.size()}))
      throw UsageError(sdk::json_depth_message(manifest, *deep));
    try {
      j = json::parse(std::string_view(text.data(), text.size()));
    } catch (const json::exception& e) {
      rd.fail(std::string("not valid JSON (a damaged or partial trunk; run k3host pack-trunk again): ") + e.what());
    }
  }
  if (rd.str(j, "format", "top level") != trunk_format::kFormat) rd.fail("\"format\" is not k3host-trunk");
  const std::uint64_t version = rd.u64(j, "version", "top level");
  if (version != static_cast<std::uint64_t>(trunk_format::kVersion) &&
      version != static_cast<std::uint64_t>(trunk_format::kCodedVersion))
    rd.fail("unsupported version " + std::to_string(version) + " (this k3host reads versions " +
            std::to_string(trunk_format::kVersion) + " and " + std::to_string(trunk_format::kCodedVersion) + ")");
  if (rd.u64(j, "align", "top level") != kTrunkAlign) rd.fail("\"align\" must be 4096");

  PackedTrunk t;
  t.uri_ = uri;
  trunk_codec::Codec codec = trunk_codec::Codec::none;
  if (version == static_cast<std::uint64_t>(trunk_format::kCodedVersion)) {
    const std::string name = rd.str(j, "codec", "top level");
    if (!trunk_codec::parse_codec(name, codec) || codec == trunk_codec::Codec::none)
      rd.fail("unknown codec \"" + name + "\" (this k3host reads " + trunk_codec::known_codecs() + ")");
  }
  t.codec_ = std::string(trunk_codec::name(codec));
  const bool coded_pack = codec != trunk_codec::Codec::none;
  t.fingerprint_ = rd.hex(j, "config_fingerprint", "top level");
  if (t.fingerprint_ != expected_fingerprint)
    rd.fail("packed for a model with config fingerprint " + trunk_format::hex64(t.fingerprint_) +
            ", but this model's is " + trunk_format::hex64(expected_fingerprint) + "; repack it with k3host pack-trunk");
  t.bin_bytes_ = rd.u64(j, "trunk_bin_bytes", "top level");
  const std::string bin = t.bin_uri();
  const std::uint64_t actual = io::open_file(storage, bin, "trunk.bin")->size();
  if (actual != t.bin_bytes_)
    throw UsageError(bin + ": " + std::to_string(actual) + " bytes, trunk.json says " + std::to_string(t.bin_bytes_));

  const json& layers = rd.member(j, "layers", "top level");
  if (!layers.is_array() || layers.empty()) rd.fail("\"layers\" must be a non-empty array");
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string where = "layers[" + std::to_string(i) + "]";
    PackedRun r = rd.run(layers[i], where, t.bin_bytes_, coded_pack);
    if (r.coded()) rd.coded_run_end(r, where);
    if (rd.u64(layers[i], "layer", where) != i) rd.fail(where + ": \"layer\" must be " + std::to_string(i));
    r.layer = static_cast<std::int64_t>(i);
    r.name = "layer " + std::to_string(i);
    t.layers_.push_back(std::move(r));
  }
  const json& globals = rd.member(j, "globals", "top level");
  if (!globals.is_array()) rd.fail("\"globals\" must be an array");
  for (std::size_t i = 0; i < globals.size(); ++i) {
    const std::string where = "globals[" + std::to_string(i) + "]";
    PackedRun r = rd.run(globals[i], where, t.bin_bytes_, coded_pack);
    if (r.coded()) rd.coded_run_end(r, where);
    r.name = rd.str(globals[i], "name", where);
    t.globals_.push_back(std::move(r));
  }
  // Runs must not overlap (each owns its padded span).
  std::vector<const PackedRun*> all;
  for (const auto& r : t.layers_) all.push_back(&r);
  for (const auto& r : t.globals_) all.push_back(&r);
  std::sort(all.begin(), all.end(), [](const PackedRun* a, const PackedRun* b) { return a->file_offset < b->file_offset; });
  for (std::size_t i = 1; i < all.size(); ++i)
    if (all[i - 1]->file_offset + all[i - 1]->stored_bytes() > all[i]->file_offset)
      rd.fail("runs '" + all[i - 1]->name + "' and '" + all[i]->name + "' overlap");
  return t;
}

void PackedTrunk::verify_hashes(sdk::StorageBackend& storage) const {
  std::unique_ptr<sdk::StorageFile> file;
  if (const sdk::Status st = storage.open(bin_uri(), file); !st.ok()) throw RuntimeError(st.detail);
  for (const auto* runs : {&layers_, &globals_})
    for (const auto& r : *runs) {
      const std::uint64_t h = trunk_format::hash_range(*file, bin_uri(), r.file_offset, r.stored_bytes());
      if (h != r.xxh64)
        throw RuntimeError(bin_uri() + ": run '" + r.name + "' at offset " + std::to_string(r.file_offset) +
                           " has xxh64 " + trunk_format::hex64(h) + ", trunk.json says " + trunk_format::hex64(r.xxh64));
      if (!r.coded()) continue;
      const std::uint64_t d = trunk_format::decoded_hash(*file, bin_uri(), r);
      if (d != r.raw_xxh64)
        throw RuntimeError(bin_uri() + ": run '" + r.name + "' decodes to xxh64 " + trunk_format::hex64(d) +
                           ", trunk.json says " + trunk_format::hex64(r.raw_xxh64));
    }
}

}  // namespace k3
