// State files (docs/architecture.md): a conversation saved and resumed.
//
//   offset 0   char[8]  "K3STATE\0"
//          8   u32      format version (1)
//         12   u32      reserved (0)
//         16   u64      architecture fingerprint (ModelConfig::fingerprint)
//         24   u64      payload bytes
//         32   u64      XXH64 of the payload (seed 0)
//         40   payload: i64 position, u64 n_tokens, u32 tokens[n_tokens], then per layer in
//              order: KDA → S, conv_q, conv_k, conv_v (f32, sizes from the config);
//              MLA → u64 n_floats, f32 latent[n_floats]
// All little-endian. Written to "<file>.tmp.<pid>", flushed, then renamed over <file>.
#pragma once
#include <filesystem>

#include <k3/model_config.hpp>

#include "maths/state.hpp"

namespace k3::model {

void save_state(const std::filesystem::path& file, const ModelConfig& c, const SequenceState& st);
/// Refuses (UsageError naming the file) a wrong magic, version, fingerprint, size or checksum.
SequenceState load_state(const std::filesystem::path& file, const ModelConfig& c);

}  // namespace k3::model
