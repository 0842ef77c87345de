// CheckpointIndex: every *.safetensors shard of a checkpoint (sorted by file name, so shard
// numbers are stable), validated by read_safetensors_header, plus the cross-shard checks:
// no tensor name twice, and model.safetensors.index.json (when present) agrees. Everything
// is read through the storage plugin; the shard list comes from its list() or, when it
// cannot list (http), from the index json.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <iterator>
#include <mutex>
#include <optional>
#include <set>

#include <simdjson.h>
#include <xxhash.h>

#include <k3/checkpoint.hpp>
#include <k3/error.hpp>
#include <k3/json_depth.hpp>

#include "io/checkpoint_identity.hpp"
#include "io/safetensors.hpp"
#include "io/small_file.hpp"
#include "io/uri.hpp"

namespace k3 {

const char* to_string(DType t) noexcept {
  switch (t) {
    case DType::bf16: return "BF16";
    case DType::f32: return "F32";
    case DType::u8: return "U8";
    case DType::f16: return "F16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::f64: return "F64";
    case DType::i8: return "I8";
    case DType::u16: return "U16";
    case DType::i16: return "I16";
  }
  return "?";
}

std::size_t element_size(DType t) noexcept {
  switch (t) {
    case DType::u8:
    case DType::i8: return 1;
    case DType::bf16:
    case DType::f16:
    case DType::u16:
    case DType::i16: return 2;
    case DType::f32:
    case DType::i32: return 4;
    case DType::i64:
    case DType::f64: return 8;
  }
  return 0;
}

namespace {

constexpr std::string_view kIndexJson = "model.safetensors.index.json";
constexpr std::string_view kShardSuffix = ".safetensors";

std::uint64_t name_hash(std::string_view s) { return XXH3_64bits(s.data(), s.size()); }

std::string shape_string(const std::vector<std::uint64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// Calls visit(name, shard) for each entry of the index's weight_map, in file order. The
// views point into `parser`'s string buffer and `json`: valid while both live. On-demand
// parsing and no per-entry allocation: the full K3's index lists ~497,000 names.
template <class Visit>
void for_each_weight_map_entry(simdjson::ondemand::parser& parser, const std::string& file,
                               const simdjson::padded_string& json, Visit&& visit) {
  auto bad_json = [&](simdjson::error_code e) {
    return UsageError(file + ": not valid JSON (" + simdjson::error_message(e) + ")");
  };
  simdjson::ondemand::document doc;
  if (auto e = parser.iterate(json).get(doc); e) throw bad_json(e);
  simdjson::ondemand::object root;
  if (auto e = doc.get_object().get(root); e) throw bad_json(e);
  bool have_map = false;
  for (auto field : root) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key); e) throw bad_json(e);
    if (key != "weight_map") continue;
    have_map = true;
    simdjson::ondemand::object weight_map;
    if (field.value().get_object().get(weight_map)) throw UsageError(file + ": weight_map: must be an object");
    for (auto entry : weight_map) {
      std::string_view name, shard;
      if (auto e = entry.unescaped_key().get(name); e) throw bad_json(e);
      if (entry.value().get_string().get(shard))
        throw UsageError(file + ": tensor '" + std::string(name) + "': shard name must be a string");
      visit(name, shard);
    }
  }
  if (!have_map) throw UsageError(file + ": weight_map: missing");
}

// A shard name the index gives must be a plain .safetensors file name of the folder
// (io/uri.hpp): the same rule whatever the backend, so a checkpoint is refused everywhere or
// nowhere. UsageError naming the index, the tensor and the shard.
void require_plain_shard_name(const std::string& file, std::string_view tensor, std::string_view shard) {
  std::string problem = io::plain_name_problem(shard);
  if (problem.empty() && !shard.ends_with(kShardSuffix)) problem = "it does not end in .safetensors";
  if (!problem.empty())
    throw UsageError(file + ": tensor '" + io::shown_name(tensor) + "': shard '" + io::shown_name(shard) +
                     "' is not a plain .safetensors file name of this folder (" + problem + ")");
}

// model.safetensors.index.json: every name in weight_map must be in the shard it names.
void check_index_json(const std::string& file, const simdjson::padded_string& json, const CheckpointIndex& index) {
  std::vector<std::string_view> shard_names;
  for (const auto& f : index.files()) shard_names.push_back(f.name);
  // Collect first, then check in parallel.
  struct Entry {
    std::string_view name, shard;
  };
  std::vector<Entry> entries;
  simdjson::ondemand::parser parser;  // owns the unescaped names the entries view
  for_each_weight_map_entry(parser, file, json, [&](std::string_view name, std::string_view shard) {
    entries.push_back({name, shard});
  });
  const auto n = static_cast<std::int64_t>(entries.size());
  std::int64_t first_bad = n;
#pragma omp parallel for reduction(min : first_bad)
  for (std::int64_t i = 0; i < n; ++i) {
    const Entry& en = entries[static_cast<std::size_t>(i)];
    const TensorInfo* t = index.find(en.name);
    if (!t || shard_names[t->file] != en.shard) first_bad = std::min(first_bad, i);
  }
  if (first_bad < n) {  // the first bad entry in file order, whatever the thread count
    const Entry& en = entries[static_cast<std::size_t>(first_bad)];
    const TensorInfo* t = index.find(en.name);
    require_plain_shard_name(file, en.name, en.shard);
    const std::string name(en.name), shard(en.shard);
    if (!t) throw UsageError(file + ": tensor '" + name + "': listed in shard '" + shard + "' but no shard holds it");
    throw UsageError(file + ": tensor '" + name + "': listed in shard '" + shard + "' but found in '" +
                     std::string(shard_names[t->file]) + "'");
  }
}

// The distinct shard names of the index's weight_map, sorted: the shard list of a
// checkpoint whose storage plugin cannot list the folder. A name is joined to the
// checkpoint URI, so it must be a plain file name.
std::vector<std::string> shards_named_by(const std::string& file, const simdjson::padded_string& json) {
  std::set<std::string, std::less<>> names;
  simdjson::ondemand::parser parser;
  for_each_weight_map_entry(parser, file, json, [&](std::string_view name, std::string_view shard) {
    if (names.find(shard) != names.end()) return;
    require_plain_shard_name(file, name, shard);
    names.emplace(shard);
  });
  return {names.begin(), names.end()};
}

// The checkpoint's shard names, sorted: the .safetensors files the storage plugin lists
// (each a plain file name), or, when it cannot list (http), those the index names. Apart
// from CheckpointIndex::open: finding the shards is one step, with its own refusals.
std::vector<std::string> shard_names_of(sdk::StorageBackend& storage, const std::string& uri,
                                        const std::string& index_uri,
                                        const std::optional<simdjson::padded_string>& index_json) {
  std::vector<std::string> names;
  const sdk::Status listed = storage.list(uri, names);
  if (listed.code == sdk::StatusCode::unsupported) {
    if (!index_json)
      throw UsageError(index_uri + ": required, because the storage plugin cannot list " + uri +
                       " and the index names the shards (" + listed.detail + ")");
    names = shards_named_by(index_uri, *index_json);
  } else if (listed.code == sdk::StatusCode::not_found) {
    throw UsageError(uri + ": no checkpoint folder there (" + listed.detail + ")");
  } else if (!listed.ok()) {
    throw RuntimeError(uri + ": cannot list the checkpoint folder through the storage plugin: " + listed.detail);
  } else {
    std::erase_if(names, [](const std::string& n) { return !n.ends_with(kShardSuffix); });
    // The rule the index's names meet, for a listed folder too (io/uri.hpp).
    for (const std::string& n : names)
      if (const std::string problem = io::plain_name_problem(n); !problem.empty())
        throw UsageError(uri + ": shard '" + io::shown_name(n) + "' is not a plain file name (" + problem +
                         "): rename it");
  }
  if (names.empty()) throw UsageError(uri + ": no .safetensors shards");
  std::sort(names.begin(), names.end());
  return names;
}

// What reading the shards' headers gave, shard by shard (the tensors, the identity digest
// and the seconds it took).
struct ShardHeaders {
  std::vector<std::vector<TensorInfo>> parts;
  std::vector<io::ShardDigest> digests;
  std::vector<double> digest_seconds;
};

// Reads every shard's header into `files` and the result. Shards are parsed in parallel;
// the error reported is the one of the first bad shard, so the message does not depend on
// the thread count. The plugin's open() is called from one thread at a time (the storage
// contract); its reads run in parallel. Each thread reuses one header buffer. Apart from
// CheckpointIndex::open: the parallel loop and its error handling are one topic.
ShardHeaders read_shard_headers(sdk::StorageBackend& storage, const std::string& uri,
                                const std::vector<std::string>& names, std::vector<ShardFile>& files) {
  const auto n = static_cast<std::int64_t>(names.size());
  ShardHeaders out;
  out.parts.resize(names.size());
  out.digests.resize(names.size());
  out.digest_seconds.resize(names.size());
  std::vector<std::exception_ptr> errors(names.size());
  std::vector<std::vector<char>> buffers(static_cast<std::size_t>(omp_get_max_threads()));
  std::mutex open_mutex;
  files.resize(names.size());
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t i = 0; i < n; ++i) {
    const auto u = static_cast<std::size_t>(i);
    try {
      ShardFile& shard = files[u];
      shard.name = names[u];
      shard.uri = io::join_uri(uri, shard.name);
      std::unique_ptr<sdk::StorageFile> file;
      {
        const std::lock_guard<std::mutex> lock(open_mutex);
        file = io::open_file(storage, shard.uri, "a shard");
      }
      shard.size = file->size();
      auto& buffer = buffers[static_cast<std::size_t>(omp_get_thread_num()) % buffers.size()];
      const std::uint64_t header =
          io::read_safetensors_header(*file, shard.uri, static_cast<std::uint32_t>(i), buffer, out.parts[u]);
      // The shard's part of the checkpoint identity, while the file is open and its header
      // at hand (io/checkpoint_identity.hpp).
      const auto t0 = std::chrono::steady_clock::now();
      const std::string_view header_bytes(buffer.data(), static_cast<std::size_t>(header));
      out.digests[u] = io::shard_digest(*file, shard.uri, shard.name, header_bytes, out.parts[u]);
      out.digest_seconds[u] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } catch (...) {
      errors[u] = std::current_exception();
    }
  }
  for (std::size_t i = 0; i < out.parts.size(); ++i)
    if (errors[i]) std::rethrow_exception(errors[i]);
  return out;
}

// The open-addressed name table CheckpointIndex::find probes: a slot holds the name hash's
// high 32 bits and the tensor's index + 1 (0 = empty), at a load of at most one half. A name
// twice is refused here, naming both shards.
std::vector<std::uint64_t> name_slots_of(const std::vector<TensorInfo>& tensors, const std::vector<ShardFile>& files) {
  std::size_t cap = 1024;
  while (cap < 2 * tensors.size()) cap *= 2;
  std::vector<std::uint64_t> slots(cap, 0);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& t = tensors[i];
    const std::uint64_t h = name_hash(t.name);
    for (std::size_t s = h & (cap - 1);; s = (s + 1) & (cap - 1)) {
      const std::uint64_t slot = slots[s];
      if (slot == 0) {
        slots[s] = (h & 0xffffffff00000000ull) | (i + 1);
        break;
      }
      if ((slot ^ h) >> 32 != 0) continue;
      const TensorInfo& other = tensors[(slot & 0xffffffffu) - 1];
      if (other.name == t.name)
        throw UsageError(files[t.file].uri + ": tensor '" + t.name + "': duplicate name (also in " +
                         files[other.file].uri + ")");
    }
  }
  return slots;
}

}  // namespace

CheckpointIndex CheckpointIndex::open(sdk::StorageBackend& storage, const std::string& uri) {
  CheckpointIndex idx;
  idx.uri_ = uri;
  const std::string index_uri = io::join_uri(uri, kIndexJson);
  std::optional<simdjson::padded_string> index_json;
  if (const auto file = io::open_file(storage, index_uri, "the checkpoint index", true))
    index_json = io::read_whole(*file, index_uri, io::kMaxIndexJson);
  if (index_json)
    if (const auto deep = sdk::json_too_deep({index_json->data(), index_json->size()}))
      throw UsageError(sdk::json_depth_message(index_uri, *deep));

  const std::vector<std::string> names = shard_names_of(storage, uri, index_uri, index_json);
  ShardHeaders shards = read_shard_headers(storage, uri, names, idx.files_);
  std::size_t total = 0;
  for (const auto& p : shards.parts) total += p.size();
  if (total >= (std::size_t{1} << 31)) throw UsageError(uri + ": too many tensors");
  idx.tensors_.reserve(total);
  for (auto& p : shards.parts) {
    std::move(p.begin(), p.end(), std::back_inserter(idx.tensors_));
    std::vector<TensorInfo>().swap(p);
  }
  idx.name_slots_ = name_slots_of(idx.tensors_, idx.files_);

  if (index_json) check_index_json(index_uri, *index_json, idx);
  std::vector<std::uint64_t> shard_digests;
  for (std::size_t i = 0; i < shards.digests.size(); ++i) {
    shard_digests.push_back(shards.digests[i].digest);
    idx.sampled_bytes_ += shards.digests[i].sampled_bytes;
    idx.digest_seconds_ += shards.digest_seconds[i];
  }
  idx.content_digest_ =
      io::content_digest(index_json ? std::string_view(index_json->data(), index_json->size()) : std::string_view(),
                         shard_digests);
  return idx;
}

const TensorInfo* CheckpointIndex::find(std::string_view name) const {
  if (name_slots_.empty()) return nullptr;
  const std::size_t mask = name_slots_.size() - 1;
  const std::uint64_t h = name_hash(name);
  for (std::size_t s = h & mask;; s = (s + 1) & mask) {
    const std::uint64_t slot = name_slots_[s];
    if (slot == 0) return nullptr;
    if ((slot ^ h) >> 32 != 0) continue;
    const TensorInfo& t = tensors_[(slot & 0xffffffffu) - 1];
    if (t.name == name) return &t;
  }
}

const TensorInfo& CheckpointIndex::require(std::string_view name, DType dtype,
                                           const std::vector<std::uint64_t>& shape) const {
  const TensorInfo* t = find(name);
  if (!t) throw UsageError(uri_ + ": tensor '" + std::string(name) + "': missing from the checkpoint");
  const std::string& file = files_[t->file].uri;
  if (t->dtype != dtype)
    throw UsageError(file + ": tensor '" + t->name + "': dtype " + to_string(t->dtype) + ", expected " +
                     to_string(dtype));
  if (t->shape != shape)
    throw UsageError(file + ": tensor '" + t->name + "': shape " + shape_string(t->shape) + ", expected " +
                     shape_string(shape));
  return *t;
}

}  // namespace k3
