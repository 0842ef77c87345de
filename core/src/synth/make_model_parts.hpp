// The pieces of make-model: weight generation, the tokenizer files and config.json.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <k3/geometry.hpp>

namespace k3::detail {

// ---- weights (make_model_weights.cpp) ----

/// How one tensor's values are drawn (docs/model-spec.md §2 roles; scaled so activations stay in
/// a realistic range through many layers). Every value of a BF16-or-F32 tensor is rounded
/// to bf16 first and stored in the tensor's dtype (F32: widened, exact), so the same model
/// holds the same numbers whichever dtype mix it is written in.
struct InitRule {
  enum class Kind {
    uniform,      ///< zero-mean uniform with standard deviation `std`
    near_one,     ///< 1 + uniform(±0.1): RMSNorm weights
    conv_taps,    ///< [P,1,K]: current-token tap (k = K-1) in [0.6, 1.0], others ±0.25
    a_log,        ///< log A, A log-uniform in [1, 16]
    dt_bias,      ///< uniform(±0.5)
    router_bias,  ///< uniform(±0.02)
    fp4_codes,    ///< U8 random nibbles: codes uniform over the 16 E2M1 values
    fp4_scales,   ///< U8 E8M0 exponents near `scale_byte`, some groups 255 when `zero_groups`
  };
  Kind kind = Kind::uniform;
  DType dtype = DType::bf16;  ///< how the values are stored: BF16, or F32 holding bf16 values
  float std = 0;
  std::int64_t conv_k = 0;
  int scale_byte = 127;
  bool zero_groups = false;
};

InitRule init_rule(const TensorSpec& t, const TensorGroup& g, const ModelConfig& c);

/// Elements generated from one random stream; a tensor is cut into chunks of this many
/// elements so generation can run in parallel and still give the same bytes everywhere.
inline constexpr std::uint64_t kChunkElements = std::uint64_t{1} << 18;

/// Seed of a tensor's streams: a function of the model seed and the tensor name only, so a
/// tensor's bytes do not depend on shard layout or write order.
std::uint64_t tensor_seed(std::uint64_t model_seed, std::string_view name);

/// Writes elements [chunk·kChunkElements, +count) of a tensor (count ≤ kChunkElements)
/// into `out` (count × element size bytes).
void generate_chunk(const InitRule& rule, std::uint64_t seed, std::uint64_t chunk, std::uint64_t count, std::byte* out);

// ---- tokenizer (make_model_tokenizer.cpp) ----

/// tokenizer_config.json: added_tokens_decoder with the K3 special names at ranks+0..255.
std::string make_tokenizer_config_json(std::int64_t ranks);
/// The special token name at id ranks + slot (slot 0..255).
std::string special_token_name(std::int64_t ranks, int slot);
/// The embedded training text (make_model_corpus.cpp).
std::string_view bpe_training_text();

// ---- config.json (make_model_config_json.cpp) ----

/// `headers_only` is recorded under k3host_synthetic (such a model's tensors read as zeros).
std::string make_config_json(const ModelGeometry& g, std::uint64_t seed, bool headers_only);

}  // namespace k3::detail
