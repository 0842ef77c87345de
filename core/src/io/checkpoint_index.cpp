// CheckpointIndex: every *.safetensors shard of a directory (sorted by file name, so shard
// numbers are stable), validated by read_safetensors_header, plus the cross-shard checks:
// no tensor name twice, and model.safetensors.index.json (when present) agrees.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <exception>
#include <iterator>
#include <fstream>
#include <sstream>

#include <simdjson.h>
#include <xxhash.h>

#include <k3/checkpoint.hpp>
#include <k3/error.hpp>

#include "io/mapped_json.hpp"
#include "io/safetensors.hpp"

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

namespace fs = std::filesystem;

std::uint64_t name_hash(std::string_view s) { return XXH3_64bits(s.data(), s.size()); }

std::string shape_string(const std::vector<std::uint64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// model.safetensors.index.json: every name in weight_map must be in the shard it names.
// (On-demand parsing and no per-entry allocation: the full K3's index lists ~497,000 names.)
void check_index_json(const fs::path& path, const CheckpointIndex& index) {
  const std::string file = path.string();
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UsageError(file + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  const int rc = ::fstat(fd, &st);
  std::optional<detail::MappedJson> mapped;
  try {
    if (rc == 0) mapped.emplace(fd, 0, static_cast<std::uint64_t>(st.st_size), file);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);  // the mapping stays valid
  if (rc != 0) throw UsageError(file + ": cannot stat: " + std::strerror(errno));
  std::vector<std::string> shard_names;
  for (const auto& f : index.files()) shard_names.push_back(f.path.filename().string());
  auto bad_json = [&](simdjson::error_code e) {
    return UsageError(file + ": not valid JSON (" + simdjson::error_message(e) + ")");
  };
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  if (auto e = parser.iterate(mapped->view()).get(doc); e) throw bad_json(e);
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
    // Collect first (the views stay valid while the document lives), then check in parallel.
    struct Entry {
      std::string_view name, shard;
    };
    std::vector<Entry> entries;
    for (auto entry : weight_map) {
      Entry en;
      if (auto e = entry.unescaped_key().get(en.name); e) throw bad_json(e);
      if (entry.value().get_string().get(en.shard))
        throw UsageError(file + ": tensor '" + std::string(en.name) + "': shard name must be a string");
      entries.push_back(en);
    }
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
      const std::string name(en.name), shard(en.shard);
      if (!t) throw UsageError(file + ": tensor '" + name + "': listed in shard '" + shard + "' but no shard holds it");
      throw UsageError(file + ": tensor '" + name + "': listed in shard '" + shard + "' but found in '" +
                       shard_names[t->file] + "'");
    }
  }
  if (!have_map) throw UsageError(file + ": weight_map: missing");
}

}  // namespace

CheckpointIndex CheckpointIndex::open(const fs::path& dir) {
  CheckpointIndex idx;
  idx.dir_ = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw UsageError(dir.string() + ": not a checkpoint directory");
  std::vector<fs::path> shards;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().extension() == ".safetensors" && entry.is_regular_file()) shards.push_back(entry.path());
  if (ec) throw UsageError(dir.string() + ": cannot list (" + ec.message() + ")");
  if (shards.empty()) throw UsageError(dir.string() + ": no .safetensors shards");
  std::sort(shards.begin(), shards.end());

  // Shards are parsed in parallel; the error reported is the one of the first bad shard, so
  // the message does not depend on the thread count.
  const auto n = static_cast<std::int64_t>(shards.size());
  std::vector<std::vector<TensorInfo>> parts(shards.size());
  std::vector<std::exception_ptr> errors(shards.size());
  idx.files_.resize(shards.size());
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t i = 0; i < n; ++i) {
    const auto u = static_cast<std::size_t>(i);
    try {
      idx.files_[u].path = shards[u];
      detail::read_safetensors_header(shards[u], static_cast<std::uint32_t>(i), idx.files_[u].size, parts[u]);
    } catch (...) {
      errors[u] = std::current_exception();
    }
  }
  std::size_t total = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (errors[i]) std::rethrow_exception(errors[i]);
    total += parts[i].size();
  }
  if (total >= (std::size_t{1} << 31)) throw UsageError(dir.string() + ": too many tensors");
  idx.tensors_.reserve(total);
  for (auto& p : parts) {
    std::move(p.begin(), p.end(), std::back_inserter(idx.tensors_));
    std::vector<TensorInfo>().swap(p);
  }

  std::size_t cap = 1024;
  while (cap < 2 * idx.tensors_.size()) cap *= 2;
  idx.name_slots_.assign(cap, 0);
  for (std::size_t i = 0; i < idx.tensors_.size(); ++i) {
    const TensorInfo& t = idx.tensors_[i];
    const std::uint64_t h = name_hash(t.name);
    for (std::size_t s = h & (cap - 1);; s = (s + 1) & (cap - 1)) {
      const std::uint64_t slot = idx.name_slots_[s];
      if (slot == 0) {
        idx.name_slots_[s] = (h & 0xffffffff00000000ull) | (i + 1);
        break;
      }
      if ((slot ^ h) >> 32 != 0) continue;
      const TensorInfo& other = idx.tensors_[(slot & 0xffffffffu) - 1];
      if (other.name == t.name)
        throw UsageError(idx.files_[t.file].path.string() + ": tensor '" + t.name + "': duplicate name (also in " +
                         idx.files_[other.file].path.string() + ")");
    }
  }

  const auto index_json = dir / "model.safetensors.index.json";
  if (fs::exists(index_json)) check_index_json(index_json, idx);
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
  if (!t) throw UsageError(dir_.string() + ": tensor '" + std::string(name) + "': missing from the checkpoint");
  const std::string file = files_[t->file].path.string();
  if (t->dtype != dtype)
    throw UsageError(file + ": tensor '" + t->name + "': dtype " + to_string(t->dtype) + ", expected " + to_string(dtype));
  if (t->shape != shape)
    throw UsageError(file + ": tensor '" + t->name + "': shape " + shape_string(t->shape) + ", expected " +
                     shape_string(shape));
  return *t;
}

}  // namespace k3
