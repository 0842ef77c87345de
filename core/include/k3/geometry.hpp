// Model geometries (configs/models/<name>.yaml) and the checkpoint layout they imply.
//
// A geometry file holds every config.json key of the language model under `text_config:`
// (KDA keys under `text_config.linear_attn_config:`, docs/model-spec.md §1 names), validated by the
// same rules as a checkpoint's config.json, plus a `writer:` section for `k3host make-model`.
// The layout functions list every tensor of a checkpoint in the released naming scheme
// (docs/model-spec.md §2) in the order make-model writes them; the planner uses them to size a
// model without its weights.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <k3/checkpoint.hpp>
#include <k3/model_config.hpp>

namespace k3 {

/// Which dtypes make-model writes the tensors that are not routed experts in: `release` as
/// the released checkpoint stores them (F32 for the KDA convolution kernels, A_log, dt_bias,
/// o_norm and the router's e_score_correction_bias, BF16 elsewhere), `compact` BF16 wherever
/// BF16 is accepted, `f32` F32 wherever F32 is accepted (matrices too: twice the bytes; it
/// exercises the F32 matrix path). The values are the same numbers in every mix
/// (bf16-representable), so a model gives the same output bits in each.
enum class DTypeMix : std::uint8_t { release, compact, f32 };
/// "release" / "compact" / "f32"; parse_dtype_mix throws UsageError naming `what` otherwise.
const char* to_string(DTypeMix m) noexcept;
DTypeMix parse_dtype_mix(std::string_view text, const std::string& what);

/// The `writer:` section of a geometry file.
struct WriterSettings {
  std::uint64_t seed = 0;               ///< weights, deterministic on every host
  std::uint64_t shard_size_bytes = 0;   ///< target shard size; a tensor group never straddles shards
  std::int64_t tokenizer_ranks = 0;     ///< BPE ranks in tiktoken.model; vocab_size = ranks + 256
  bool headers_only_required = false;   ///< true: too big to write (k3): only --headers-only
  DTypeMix dtypes = DTypeMix::release;  ///< writer.dtypes: release (default) or compact
};

struct ModelGeometry {
  std::string name;            ///< file stem, e.g. "tiny"
  std::filesystem::path file;  ///< the YAML it came from
  ModelConfig config;
  WriterSettings writer;
};

/// The YAML file for NAME, looked for in $K3_MODELS_DIR first, then in the data folder's
/// configs/models/ (k3/data_dir.hpp: the source tree's in a build, <prefix>/share/k3host's
/// installed), or FILE (a path, recognised by a '/' or a .yaml/.yml suffix). UsageError
/// naming every place tried when absent.
std::filesystem::path find_geometry(const std::string& name_or_file);
/// Loads and validates a geometry; UsageError "<file>:<line>:<col>: <key>: <what>".
ModelGeometry load_geometry(const std::string& name_or_file);

/// Which dtypes a tensor may be stored in.
class DTypeSet {
 public:
  constexpr DTypeSet() = default;
  constexpr explicit DTypeSet(DType t) : bits_(1u << static_cast<unsigned>(t)) {}
  [[nodiscard]] constexpr bool has(DType t) const { return (bits_ >> static_cast<unsigned>(t)) & 1u; }
  [[nodiscard]] constexpr DTypeSet operator|(DTypeSet o) const {
    DTypeSet r;
    r.bits_ = bits_ | o.bits_;
    return r;
  }
  /// "BF16 or F32".
  [[nodiscard]] std::string describe() const;

 private:
  std::uint32_t bits_ = 0;
};

/// The part of the model a tensor belongs to.
enum class TensorPart : std::uint8_t {
  embedding,  ///< embed_tokens
  trunk,      ///< a layer's tensors other than routed experts and the dense FFN
  dense_ffn,  ///< a dense layer's FFN (a split layer streams it in row chunks)
  expert,     ///< a routed expert's MXFP4 bytes
  head,       ///< final norm, output AttnRes, lm_head
};

/// One tensor as it appears in a shard header.
struct TensorSpec {
  std::string name;
  DType dtype{};
  std::vector<std::uint64_t> shape;
  DTypeSet dtypes;  ///< the dtypes the loader accepts for it
  TensorPart part{};
  bool vector = false;  ///< held as an fp32 vector (a BF16 one is widened on binding)
  [[nodiscard]] std::uint64_t nbytes() const;
};

/// Tensors make-model keeps contiguous inside one shard: the embedding, one layer's trunk
/// (everything of the layer except routed experts), one routed expert (its six tensors in
/// the order w1, w2, w3 × packed, scale), or the output head.
struct TensorGroup {
  enum class Kind { embedding, layer_trunk, routed_expert, output };
  Kind kind{};
  std::int64_t layer = -1;   ///< 0-based; -1 for embedding/output
  std::int64_t expert = -1;  ///< routed expert id, else -1
  std::vector<TensorSpec> tensors;
  [[nodiscard]] std::uint64_t nbytes() const;
};

/// Calls `fn` for every group in write order: embedding, then per layer its trunk and its
/// routed experts 0..N-1, then the output head. Streams (the full K3 has 82,526 groups).
/// `mix`: the dtypes make-model writes (the layout's dtype of each tensor).
void for_each_tensor_group(const ModelConfig& c, const std::function<void(TensorGroup&&)>& fn,
                           DTypeMix mix = DTypeMix::release);
/// Every group at once (convenient for small models and tests).
std::vector<TensorGroup> checkpoint_layout(const ModelConfig& c, DTypeMix mix = DTypeMix::release);

/// Totals over the layout in the dtypes of `mix`. A routed-expert parameter is one MXFP4 element (0.53125 B).
struct GeometryCensus {
  std::uint64_t tensors = 0;
  std::uint64_t params = 0;  ///< logical parameters, experts included
  std::uint64_t bytes = 0;   ///< tensor bytes (safetensors data, headers excluded)
  std::uint64_t expert_params = 0;
  std::uint64_t expert_bytes = 0;  ///< every routed expert (w1, w2, w3 packed + scale)
  std::uint64_t bytes_per_expert = 0;
};
GeometryCensus geometry_census(const ModelConfig& c, DTypeMix mix = DTypeMix::release);

}  // namespace k3
