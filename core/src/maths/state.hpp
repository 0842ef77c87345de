// What a conversation carries from one step to the next (docs/model-spec.md §3): per KDA layer the
// recurrent state S of every head and the last K-1 conv inputs of q, k and v; per MLA layer
// the latent cache (normed c and k_r, kv_lora + rope floats per position). The AttnRes bank
// and running prefix are per token and are not carried.
#pragma once
#include <cstdint>
#include <vector>

namespace k3::maths {

struct KdaState {
  std::vector<float> S;       ///< [H][D value][D key] fp32 (S transposed: row j holds S[:, j])
  std::vector<float> conv_q;  ///< [P][K-1], oldest first
  std::vector<float> conv_k;  ///< [P][K-1]
  std::vector<float> conv_v;  ///< [P][K-1]
};

struct MlaCache {
  std::vector<float> latent;  ///< [positions][kv_lora + rope]: normed c, then k_r
};

struct SequenceState {
  std::int64_t position = 0;          ///< tokens consumed so far
  std::vector<std::uint32_t> tokens;  ///< every token consumed, in order
  std::vector<KdaState> kda;          ///< per layer (empty for MLA layers)
  std::vector<MlaCache> mla;          ///< per layer (empty for KDA layers)
};

}  // namespace k3::maths
