// make-model: plans the shards, writes every file into a temporary sibling directory, syncs,
// and renames it into place (make_model.hpp has the contract).
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

#include <k3/error.hpp>
#include <k3/make_model.hpp>
#include <k3/units.hpp>
#include <k3/user_files.hpp>

#include "synth/make_model_parts.hpp"
#include "synth/safetensors_write.hpp"
#include "util/atomic_file.hpp"
#include "util/temp_dir.hpp"

namespace k3 {
namespace {

namespace fs = std::filesystem;


/// True when `dir` holds a checkpoint that make-model wrote (its config.json says so), the
/// only kind of folder --force may replace.
bool written_by_make_model(const fs::path& dir) {
  try {
    // A regular file of config.json's size (make-model writes a few kB): a FIFO or a device
    // there is no checkpoint of ours, and is never opened.
    const std::string head = read_user_file(dir / "config.json", "", "config.json", 1'000'000);
    return head.find("\"k3host_synthetic\"") != std::string::npos;
  } catch (const UsageError&) {
    return false;
  }
}

struct ShardPlan {
  std::vector<std::uint64_t> groups;      ///< groups per shard, in write order
  std::vector<std::uint64_t> data_bytes;  ///< per shard
};

ShardPlan plan_shards(const ModelConfig& c, std::uint64_t target, DTypeMix mix) {
  ShardPlan plan;
  std::uint64_t groups = 0, bytes = 0;
  for_each_tensor_group(
      c,
      [&](TensorGroup&& g) {
    const std::uint64_t b = g.nbytes();
    if (groups > 0 && bytes + b > target) {
      plan.groups.push_back(groups);
      plan.data_bytes.push_back(bytes);
      groups = 0;
      bytes = 0;
    }
    ++groups;
    bytes += b;
      },
      mix);
  plan.groups.push_back(groups);
  plan.data_bytes.push_back(bytes);
  return plan;
}

std::string shard_name(std::size_t i, std::size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

// One chunk of generated data at a fixed place in the shard's data section.
struct WorkItem {
  detail::InitRule rule;
  std::uint64_t seed;
  std::uint64_t chunk;
  std::uint64_t count;       ///< elements
  std::uint64_t out_offset;  ///< bytes from the start of the batch
};

class ShardWriter {
 public:
  ShardWriter(const ModelConfig& c, std::uint64_t seed, bool headers_only, std::uint64_t total,
              const std::function<void(std::uint64_t, std::uint64_t)>& progress)
      : c_(c), seed_(seed), headers_only_(headers_only), total_(total), progress_(progress) {}

  /// Writes one shard; returns its file size.
  std::uint64_t write(const fs::path& path, const std::vector<TensorGroup>& groups) {
    std::vector<const TensorSpec*> specs;
    std::uint64_t data_bytes = 0;
    for (const auto& g : groups)
      for (const auto& t : g.tensors) {
        specs.push_back(&t);
        data_bytes += t.nbytes();
      }
    const std::string header = detail::encode_safetensors_header(specs);
    AtomicFile f(path);
    f.write(header.data(), header.size());  // progress counts data bytes only
    if (headers_only_) {
      f.resize(header.size() + data_bytes);  // a hole: no disk blocks
      report(data_bytes);
    } else {
      write_data(f, groups);
    }
    f.commit();
    return header.size() + data_bytes;
  }

 private:
  static constexpr std::uint64_t kBatchBytes = 32ull << 20;

  void report(std::uint64_t bytes) {
    done_ += bytes;
    if (progress_) progress_(done_, total_);
  }

  void write_data(AtomicFile& f, const std::vector<TensorGroup>& groups) {
    std::vector<WorkItem> batch;
    std::uint64_t batch_bytes = 0;
    auto flush = [&] {
      if (batch.empty()) return;
      buffer_.resize(batch_bytes);
      const auto n = static_cast<std::int64_t>(batch.size());
#pragma omp parallel for schedule(dynamic)
      for (std::int64_t i = 0; i < n; ++i) {
        const auto& w = batch[static_cast<std::size_t>(i)];
        detail::generate_chunk(w.rule, w.seed, w.chunk, w.count, buffer_.data() + w.out_offset);
      }
      f.write(buffer_.data(), batch_bytes);
      report(batch_bytes);
      batch.clear();
      batch_bytes = 0;
    };
    for (const auto& g : groups)
      for (const auto& t : g.tensors) {
        const auto rule = detail::init_rule(t, g, c_);
        const std::uint64_t seed = detail::tensor_seed(seed_, t.name);
        const std::uint64_t esize = element_size(t.dtype);
        const std::uint64_t elements = t.nbytes() / esize;
        for (std::uint64_t chunk = 0; chunk * detail::kChunkElements < elements; ++chunk) {
          const std::uint64_t count = std::min(detail::kChunkElements, elements - chunk * detail::kChunkElements);
          if (batch_bytes + count * esize > kBatchBytes) flush();
          batch.push_back({rule, seed, chunk, count, batch_bytes});
          batch_bytes += count * esize;
        }
      }
    flush();
  }

  const ModelConfig& c_;
  std::uint64_t seed_;
  bool headers_only_;
  std::uint64_t total_;
  const std::function<void(std::uint64_t, std::uint64_t)>& progress_;
  std::uint64_t done_ = 0;
  std::vector<std::byte> buffer_;
};

std::string index_json(const std::map<std::string, std::uint32_t>& where, const std::vector<std::string>& shards,
                       std::uint64_t total_size) {
  std::string j = "{\n  \"metadata\": {\"total_size\": " + std::to_string(total_size) + "},\n  \"weight_map\": {\n";
  std::size_t i = 0;
  for (const auto& [name, shard] : where) {
    j += "    \"" + name + "\": \"" + shards[shard] + "\"";
    j += ++i < where.size() ? ",\n" : "\n";
  }
  j += "  }\n}\n";
  return j;
}

// Where the result goes, checked before anything is written.
fs::path checked_target(const MakeModelOptions& o) {
  if (o.out.empty()) throw UsageError("make-model: --out DIR is required");
  fs::path out = fs::absolute(o.out).lexically_normal();
  if (!out.has_filename()) out = out.parent_path();
  std::error_code ec;
  if (fs::exists(out, ec)) {
    if (!fs::is_directory(out, ec)) throw UsageError(out.string() + ": exists and is not a directory");
    if (!fs::is_empty(out, ec) && !o.force)
      throw UsageError(out.string() + ": exists and is not empty (use --force to replace it)");
    if (!fs::is_empty(out, ec) && !written_by_make_model(out))
      throw UsageError(out.string() +
                       ": not a checkpoint make-model wrote (no k3host_synthetic in its config.json); "
                       "--force replaces only those");
  }
  return out;
}

}  // namespace

MakeModelResult make_model(const ModelGeometry& geometry, const MakeModelOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const ModelConfig& c = geometry.config;
  const DTypeMix mix = options.dtypes.value_or(geometry.writer.dtypes);
  const auto census = geometry_census(c, mix);
  if (geometry.writer.headers_only_required && !options.headers_only)
    throw UsageError("geometry '" + geometry.name + "': writing it would take " + format_bytes(census.bytes) + " (" +
                     std::to_string(census.tensors) +
                     " tensors); only --headers-only is supported for it (real headers, sparse data)");
  const fs::path out = checked_target(options);
  const fs::path parent = out.parent_path();
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) throw RuntimeError(parent.string() + ": cannot create: " + ec.message());
  if (!options.headers_only) {
    struct statvfs vfs {};
    if (::statvfs(parent.c_str(), &vfs) == 0) {
      const std::uint64_t avail = static_cast<std::uint64_t>(vfs.f_bavail) * vfs.f_frsize;
      if (census.bytes + census.bytes / 50 + (64ull << 20) > avail)
        throw UsageError(out.string() + ": needs " + format_bytes(census.bytes) + " but only " + format_bytes(avail) +
                         " is free there");
    }
  }

  MakeModelResult res;
  res.seed = options.seed.value_or(geometry.writer.seed);
  res.dtypes = mix;
  const ShardPlan plan = plan_shards(c, geometry.writer.shard_size_bytes, res.dtypes);
  std::vector<std::string> shard_names;
  for (std::size_t i = 0; i < plan.groups.size(); ++i) shard_names.push_back(shard_name(i, plan.groups.size()));

  TempDir tmp(out);
  // Progress counts tensor data only (the headers are a rounding error next to it).
  std::uint64_t total = 0;
  for (auto b : plan.data_bytes) total += b;
  ShardWriter writer(c, res.seed, options.headers_only, total, options.progress);

  std::map<std::string, std::uint32_t> where;
  std::vector<TensorGroup> pending;
  std::size_t shard = 0;
  for_each_tensor_group(
      c,
      [&](TensorGroup&& g) {
    pending.push_back(std::move(g));
    if (pending.size() < plan.groups[shard]) return;
    for (const auto& pg : pending)
      for (const auto& t : pg.tensors) {
        where.emplace(t.name, static_cast<std::uint32_t>(shard));
        ++res.tensors;
        res.tensor_bytes += t.nbytes();
      }
    res.file_bytes += writer.write(tmp.path() / shard_names[shard], pending);
    pending.clear();
    ++shard;
      },
      res.dtypes);
  res.shards = shard_names.size();

  write_file_atomically(tmp.path() / "model.safetensors.index.json", index_json(where, shard_names, res.tensor_bytes));
  write_file_atomically(tmp.path() / "config.json", detail::make_config_json(geometry, res.seed, options.headers_only));
  write_file_atomically(tmp.path() / "tiktoken.model", make_tiktoken_ranks(geometry.writer.tokenizer_ranks));
  write_file_atomically(tmp.path() / "tokenizer_config.json",
                        detail::make_tokenizer_config_json(geometry.writer.tokenizer_ranks));
  tmp.commit(written_by_make_model);
  res.dir = out;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace k3
