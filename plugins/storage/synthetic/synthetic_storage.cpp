// Storage `synthetic`: wraps another backend and, in the `.safetensors` files, replaces the
// bytes of every tensor's data with deterministic pseudo-random valid values (fill_rules.hpp)
// after the inner read. Headers, padding and every other file pass through unchanged. Over a
// `make-model --headers-only` checkpoint (sparse files that read as zeros) it gives a model
// whose forward pass runs like a real one — routing spread over the experts, finite values —
// while the I/O is still the inner backend's, so the full K3 geometry can be measured
// without 1.56 TB of weights.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <k3/plugin.hpp>

#include "common/decorator.hpp"
#include "common/inner_backend.hpp"
#include "fill_rules.hpp"
#include "shard_layout.hpp"

namespace local = k3::storage::local;
namespace syn = k3::storage::synthetic;

namespace {

using k3::sdk::Status;
using k3::sdk::StatusCode;

/// A header larger than this is refused (the K3 release's are under 1 MB).
constexpr std::uint64_t kMaxHeaderBytes = 512ull << 20;

/// What every file of the backend shares: the seed, and one table per rule (a K3 shard has
/// a few dozen distinct rules, the whole checkpoint about a hundred).
class Tables {
 public:
  explicit Tables(std::uint64_t seed) : seed_(seed) {}
  [[nodiscard]] std::uint64_t seed() const { return seed_; }

  std::shared_ptr<const syn::Table> get(const syn::Rule& rule) {
    const std::lock_guard lock(mutex_);
    for (const auto& t : tables_)
      if (t->rule() == rule) return t;
    tables_.push_back(std::make_shared<const syn::Table>(rule, seed_));
    return tables_.back();
  }

 private:
  std::uint64_t seed_;
  std::mutex mutex_;
  std::vector<std::shared_ptr<const syn::Table>> tables_;
};

class SyntheticFile final : public local::DecoratorFile {
 public:
  SyntheticFile(std::unique_ptr<k3::sdk::StorageFile> inner, std::shared_ptr<const std::vector<syn::TensorSpan>> spans,
                std::uint64_t file_key, std::uint64_t seed)
      : DecoratorFile(std::move(inner)), spans_(std::move(spans)), file_key_(file_key), seed_(seed) {}

  Status read(std::span<k3::sdk::ReadRequest> batch) noexcept override {
    Status st = inner().read(batch);
    // Requests the inner backend served are filled; a failed one keeps its failure.
    for (const auto& r : batch)
      if (r.result == StatusCode::ok && r.length > 0)
        syn::fill_range(*spans_, file_key_, seed_, r.offset, r.length, r.dest);
    return st;
  }

 private:
  std::shared_ptr<const std::vector<syn::TensorSpan>> spans_;
  std::uint64_t file_key_;
  std::uint64_t seed_;
};

/// The file name of a URI (after the last '/').
std::string_view file_name(std::string_view uri) {
  const auto slash = uri.rfind('/');
  return slash == std::string_view::npos ? uri : uri.substr(slash + 1);
}

/// Reads `length` bytes at `offset` through `file` into `out`.
Status read_exact(k3::sdk::StorageFile& file, std::uint64_t offset, std::uint64_t length, std::string& out) {
  out.resize(length);
  k3::sdk::ReadRequest r{offset, length, reinterpret_cast<std::byte*>(out.data())};
  return file.read(std::span(&r, 1));
}

class SyntheticBackend final : public local::DecoratorBackend {
 public:
  SyntheticBackend(std::unique_ptr<k3::sdk::StorageBackend> inner, std::uint64_t seed)
      : DecoratorBackend(std::move(inner)), tables_(seed) {}

 private:
  Status wrap(std::string_view uri, std::unique_ptr<k3::sdk::StorageFile> file,
              std::unique_ptr<k3::sdk::StorageFile>& out) override {
    if (!file_name(uri).ends_with(".safetensors")) {  // config, index, tokenizer: unchanged
      out = std::move(file);
      return Status::success();
    }
    std::shared_ptr<const std::vector<syn::TensorSpan>> spans;
    if (auto it = layouts_.find(std::string(uri)); it != layouts_.end() && it->second.first == file->size()) {
      spans = it->second.second;
    } else {
      if (Status made = layout(uri, *file, spans); !made.ok()) return made;
      layouts_[std::string(uri)] = {file->size(), spans};
    }
    out = std::make_unique<SyntheticFile>(std::move(file), std::move(spans), syn::name_hash(file_name(uri)),
                                          tables_.seed());
    return Status::success();
  }

  /// The tensor spans of a shard, from its header read through the inner backend.
  Status layout(std::string_view uri, k3::sdk::StorageFile& file,
                std::shared_ptr<const std::vector<syn::TensorSpan>>& out) {
    const std::string where = "synthetic: " + std::string(uri) + ": ";
    const std::uint64_t size = file.size();
    if (size < 8) return Status::error(StatusCode::invalid_argument, where + "not a safetensors file (under 8 bytes)");
    std::string bytes;
    if (Status st = read_exact(file, 0, 8, bytes); !st.ok()) return st;
    std::uint64_t header = 0;
    for (int i = 7; i >= 0; --i) header = header << 8 | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
    if (header > kMaxHeaderBytes || header > size - 8)
      return Status::error(StatusCode::invalid_argument, where + "header length " + std::to_string(header) +
                                                             " does not fit the file of " + std::to_string(size) +
                                                             " bytes");
    if (Status st = read_exact(file, 8, header, bytes); !st.ok()) return st;
    std::vector<syn::TensorEntry> entries;
    try {
      entries = syn::parse_header(bytes, 8 + header, size);
    } catch (const std::runtime_error& e) {
      return Status::error(StatusCode::invalid_argument, where + e.what());
    }
    auto spans = std::make_shared<std::vector<syn::TensorSpan>>();
    spans->reserve(entries.size());
    for (const auto& t : entries) {
      const syn::Rule rule = syn::rule_for(t.name, t.dtype, t.shape);
      spans->push_back({t.begin, t.end, rule.fill == syn::Fill::none ? nullptr : tables_.get(rule)});
    }
    out = std::move(spans);
    return Status::success();
  }

  Tables tables_;
  /// Parsed layouts by URI (and the size they were parsed at): a shard opened again is not
  /// parsed again. open() is called from one thread at a time (storage.hpp).
  std::map<std::string, std::pair<std::uint64_t, std::shared_ptr<const std::vector<syn::TensorSpan>>>> layouts_;
};

}  // namespace

namespace k3::storage::synthetic {

constexpr k3::sdk::ParamDescriptor kParams[] = {
    local::inner_name("posix"),
    local::kInnerKeys,
    sdk::param::integer("seed", "0", "[0, )", "the values' seed: the same seed gives the same bytes on every host"),
};

sdk::Status create(const sdk::CreateArgs& args, std::unique_ptr<sdk::StorageBackend>& out,
                   std::vector<std::string>& unknown_params) {
  sdk::ParamReader params(args.params, kParams);
  if (!params.ok()) return params.status();
  const local::InnerBackend inner(params);
  const auto seed = params.get_int<std::uint64_t>("seed");
  unknown_params = params.unused();
  std::unique_ptr<sdk::StorageBackend> wrapped;
  if (sdk::Status made = inner.create(args.host, "synthetic", wrapped); !made.ok()) return made;
  out = std::make_unique<SyntheticBackend>(std::move(wrapped), seed);
  return sdk::Status::success();
}

}  // namespace k3::storage::synthetic

K3_PLUGIN(storage, "synthetic", "1.0.0", k3::storage::synthetic::create, nullptr)
K3_PLUGIN_PARAMS(k3::storage::synthetic::kParams)
