#include "streaming/cache_future.hpp"

#include <k3/geometry.hpp>

namespace k3::streaming {

TraceHeader trace_header_of(const ModelConfig& c, std::uint64_t identity, std::uint64_t prompt_hash) {
  TraceHeader h;
  h.layers = static_cast<std::uint32_t>(c.num_hidden_layers);
  h.experts_per_layer = static_cast<std::uint32_t>(c.num_experts);
  h.top_k = static_cast<std::uint32_t>(c.num_experts_per_token);
  h.arch_fingerprint = c.fingerprint();
  h.prompt_hash = prompt_hash;
  h.expert_bytes = geometry_census(c).bytes_per_expert;
  h.checkpoint_identity = identity;
  return h;
}

void check_cache_future(const std::filesystem::path& file, const ModelConfig& c, std::uint64_t identity) {
  require_trace_of_run(file, read_trace_header(file), trace_header_of(c, identity, 0), false);
}

CacheFuture load_cache_future(const std::filesystem::path& file, const ModelConfig& c, std::uint64_t identity) {
  check_cache_future(file, c, identity);  // before reading a large trace of the wrong model
  const Trace t = read_trace(file);
  CacheFuture f;
  f.source = file.string();
  f.keys.reserve(t.records.size());
  f.starts_group.reserve(t.records.size());
  for (const TraceRecord& r : t.records) {
    f.keys.push_back(sdk::ExpertKey{r.layer, r.expert});
    f.starts_group.push_back(r.starts_group ? 1 : 0);
  }
  return f;
}

}  // namespace k3::streaming
