// The checkpoint index: every tensor of every .safetensors shard, validated before any
// pointer is formed (dtype known, shape × element size == byte span, span inside the file,
// no overlaps, no duplicate names). Untrusted input: a header that lies is refused with a
// UsageError naming the file and the tensor. Every byte is read through the pipeline's
// storage plugin, so the checkpoint may be a local folder or a URL.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <k3/storage.hpp>

namespace k3 {

enum class DType : std::uint8_t { bf16, f32, u8, f16, i32, i64, f64, i8, u16, i16 };
const char* to_string(DType t) noexcept;
std::size_t element_size(DType t) noexcept;

struct TensorInfo {
  std::string name;
  DType dtype{};
  std::vector<std::uint64_t> shape;
  std::uint32_t file = 0;    ///< index into CheckpointIndex::files()
  std::uint64_t offset = 0;  ///< absolute byte offset in the file (header included)
  std::uint64_t nbytes = 0;
};

/// The URI of the file `name` of the checkpoint at `checkpoint_uri` (a folder or a URL, with
/// or without a trailing '/'): joined as strings, exactly one '/' between them.
std::string checkpoint_file_uri(std::string_view checkpoint_uri, std::string_view name);

struct ShardFile {
  std::string uri;   ///< the checkpoint's URI joined with `name`: what the storage plugin opens
  std::string name;  ///< the file name, e.g. "model-00001-of-00004.safetensors"
  std::uint64_t size = 0;
};

class CheckpointIndex {
 public:
  /// Reads the shard headers of the checkpoint at `uri` (a folder or a URL) through
  /// `storage`: every *.safetensors the plugin lists there or, when it cannot list (http),
  /// every shard model.safetensors.index.json names (the index is then required). When
  /// present, the index must agree with the shards.
  static CheckpointIndex open(sdk::StorageBackend& storage, const std::string& uri);

  /// The checkpoint's URI, as given to open().
  [[nodiscard]] const std::string& uri() const noexcept { return uri_; }
  [[nodiscard]] const std::vector<ShardFile>& files() const noexcept { return files_; }
  [[nodiscard]] const std::vector<TensorInfo>& tensors() const noexcept { return tensors_; }
  /// nullptr when absent.
  [[nodiscard]] const TensorInfo* find(std::string_view name) const;
  /// The tensor, checked against an expected dtype and shape; UsageError naming file and
  /// tensor when missing or different.
  const TensorInfo& require(std::string_view name, DType dtype, const std::vector<std::uint64_t>& shape) const;

  /// The digest of what open() read (the index json, and per shard its name, size, header
  /// and a few sampled blocks of its trunk tensors, io/checkpoint_identity.hpp): the part of
  /// checkpoint_identity() the shards give. Computed by open().
  [[nodiscard]] std::uint64_t content_digest() const noexcept { return content_digest_; }
  /// Tensor bytes open() read for the digest's samples (a few hundred KB per shard at most).
  [[nodiscard]] std::uint64_t sampled_bytes() const noexcept { return sampled_bytes_; }
  /// Seconds open() spent reading and hashing for the digest, summed over its threads.
  [[nodiscard]] double digest_seconds() const noexcept { return digest_seconds_; }

 private:
  std::uint64_t content_digest_ = 0;
  std::uint64_t sampled_bytes_ = 0;
  double digest_seconds_ = 0;
  std::string uri_;
  std::vector<ShardFile> files_;
  std::vector<TensorInfo> tensors_;
  /// Name lookup: open addressing over tensors_, no copy of the names (the full K3 has
  /// ~497,000). Slot = (high 32 bits of the name hash) << 32 | (tensor index + 1); 0 = empty;
  /// size a power of two >= 2 × tensors.
  std::vector<std::uint64_t> name_slots_;
};

/// Tensor names of the released checkpoint (docs/model-spec.md §2).
namespace tensor_names {
inline constexpr std::string_view kModel = "language_model.model.";
inline constexpr std::string_view kLmHead = "language_model.lm_head.weight";
/// "language_model.model.layers.{layer}.{suffix}"
std::string layer(std::int64_t layer, std::string_view suffix);
/// "language_model.model.layers.{layer}.block_sparse_moe.experts.{expert}.w{w}.weight_{packed|scale}"
std::string expert(std::int64_t layer, std::int64_t expert, int w, bool scale);
/// Whether `name` is a routed expert's tensor (expert() names them): the bytes a run reads
/// only when the router picks that expert.
bool is_routed_expert(std::string_view name) noexcept;
}  // namespace tensor_names

/// An identity as files and messages show it: 16 lowercase hex digits.
[[nodiscard]] std::string identity_hex(std::uint64_t identity);

}  // namespace k3
