// cache.future: the trace of an earlier run handed to a policy that wants the future
// request stream (belady). The output is deterministic, so a run of the same pipeline and
// prompt requests exactly what the trace recorded; the live cache checks that it does,
// request by request and group by group, and stops with a clear error when it does not.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <k3/cache_policy.hpp>
#include <k3/model_config.hpp>
#include <k3/trace.hpp>

namespace k3::streaming {

struct CacheFuture {
  std::string source;                      ///< the trace file, for messages
  std::vector<sdk::ExpertKey> keys;        ///< request seq → key (what set_future gets)
  std::vector<std::uint8_t> starts_group;  ///< request seq → 1 when it starts a serving group
};

/// The header a run of model `c` (checkpoint identity `identity`) records (geometry,
/// fingerprint, expert bytes, identity) with `prompt_hash`.
TraceHeader trace_header_of(const ModelConfig& c, std::uint64_t identity, std::uint64_t prompt_hash);

/// Checks the header of `file` against model `c` of checkpoint `identity` (UsageError naming
/// the file and what differs: layers, experts, top-k, architecture fingerprint or checkpoint
/// identity), then reads it whole.
CacheFuture load_cache_future(const std::filesystem::path& file, const ModelConfig& c, std::uint64_t identity);

/// Header-only check of `file` against the model (the same refusals as load_cache_future).
void check_cache_future(const std::filesystem::path& file, const ModelConfig& c, std::uint64_t identity);

}  // namespace k3::streaming
