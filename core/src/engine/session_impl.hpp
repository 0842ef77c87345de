// State files (docs/architecture.md, "Stopping a run, and state files"): a conversation
// saved and resumed.
//
//   offset 0   char[8]  "K3STATE\0"
//          8   u32      format version (3)
//         12   u32      flags: bit 0 = unsound (the run that saved it lost a routed expert,
//                       so the carried state is not the model's); other bits 0
//         16   u64      architecture fingerprint (ModelConfig::fingerprint)
//         24   u64      checkpoint identity (k3/checkpoint.hpp) of the weights that computed it
//         32   u64      payload bytes
//         40   u64      XXH64 of the payload (seed 0)
//         48   payload: i64 position, u64 n_tokens, u32 tokens[n_tokens] (the ids fed),
//              u64 n_pending, u32 pending[n_pending] (ids of the conversation not fed yet:
//              the last generated token, or the rest of an interrupted prefill), then per
//              layer in order: KDA → S, conv_q, conv_k, conv_v (f32, sizes from the config);
//              MLA → u64 n_floats, f32 latent[n_floats]; when unsound, last:
//              u32 n_bytes, char reason[n_bytes] (UTF-8, one line)
// All little-endian. Version 1 had no pending ids, so a conversation saved after a run
// lacked its last printed token; it is refused (it cannot be continued exactly). Version 2
// had no checkpoint identity, so a state of a fine-tune of the same architecture was
// accepted; it is refused too (nothing shows which weights computed it). Written
// through util/atomic_file ("<file>.tmp.<pid>", flushed, renamed over <file>).
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <k3/model_config.hpp>

#include "maths/state.hpp"

namespace k3::engine {

/// The state file format version this build writes and reads.
inline constexpr std::uint32_t kStateVersion = 3;

/// What a state file holds: the carried state after the ids fed, and the ids not fed yet.
struct SavedState {
  maths::SequenceState state;
  std::vector<std::uint32_t> pending;
  std::string unsound;  ///< non-empty: why the state is not the model's (see the flags above)
};

/// `identity`: the checkpoint identity of the model that computed it. `unsound`: empty for a
/// sound state, else the reason it is not (recorded in the file).
void save_state(const std::filesystem::path& file, const ModelConfig& c, std::uint64_t identity,
                const maths::SequenceState& st, std::span<const std::uint32_t> pending, std::string_view unsound = {});
/// The most bytes a state file of `c` holding up to `max_positions` ids can have (the
/// unsound reason counted at its cap).
std::uint64_t max_state_bytes(const ModelConfig& c, std::int64_t max_positions);
/// An unsound reason is one line; save_state cuts a longer one.
inline constexpr std::uint64_t kMaxUnsoundReasonBytes = 65536;
/// Refuses (UsageError naming the file) a path that is not a regular file or is larger than
/// max_state_bytes(c, max_positions) (checked before reading), a wrong magic, version,
/// fingerprint, checkpoint identity (naming both; `model` names this run's checkpoint),
/// size, flags or checksum, and ids outside the vocabulary. An unsound state is read (its
/// reason in SavedState::unsound): the caller decides.
SavedState load_state(const std::filesystem::path& file, const ModelConfig& c, std::int64_t max_positions,
                      std::uint64_t identity, std::string_view model = {});

}  // namespace k3::engine
