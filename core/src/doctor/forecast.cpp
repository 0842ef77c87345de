// forecast(): per token, the trunk layers that stream are read whole, each MoE layer's top-k
// experts are read unless the cache holds them (hit rate forecast as slots ÷ experts, what
// a cache of that many random experts holds), an embedding row is read when the table is
// not resident and the whole lm_head when it streams. I/O time is those bytes over the
// disk's best measured bandwidth; compute time is the weights a token multiplies (every
// trunk layer, lm_head, top-k experts per MoE layer) over the kernel set's measured rates.
// The forecast is the larger of the two: reads overlap compute (docs/streaming.md), so a
// run is bound by whichever is slower.
#include "doctor/forecast.hpp"

#include <algorithm>
#include <numeric>

namespace k3::doctor {

void forecast(DoctorForecast& f, const ModelConfig& c, const MemoryPlan& p, const Rates& r, std::uint64_t usable) {
  using U = std::uint64_t;
  f.total_bytes = p.total;
  f.fits = static_cast<double>(p.total) <= kDoctorMemoryMargin * static_cast<double>(usable);
  f.resident = p.resident();
  const U moe_layers = static_cast<U>(c.num_hidden_layers - c.first_k_dense_replace);
  const U top_k = static_cast<U>(c.num_experts_per_token);
  const U E = static_cast<U>(c.hidden_size), V = static_cast<U>(c.vocab_size);
  const U routed_per_token = moe_layers * top_k;

  f.expert_hit_rate = p.experts_total == 0
                          ? 1.0
                          : std::min(1.0, static_cast<double>(p.expert_slots) / static_cast<double>(p.experts_total));
  f.trunk_bytes = p.streamed_trunk_bytes;
  f.expert_bytes =
      static_cast<U>(static_cast<double>(routed_per_token * p.expert_slot_bytes) * (1.0 - f.expert_hit_rate));
  const bool embedding_resident = p.embedding_bytes >= V * E * 2;
  f.table_bytes = (embedding_resident ? 0 : E * 2) + (p.lm_head_chunk_rows != 0 ? V * E * 2 : 0);

  if (r.disk_bytes_per_second > 0) f.io_seconds = static_cast<double>(f.bytes_per_token()) / r.disk_bytes_per_second;
  const U trunk_all = std::accumulate(p.layer_bytes.begin(), p.layer_bytes.end(), U{0});
  const U bf16_bytes = trunk_all + V * E * 2;  // every layer's matrices and the head
  const U mxfp4_bytes = routed_per_token * p.expert_slot_bytes;
  if (r.bf16_bytes_per_second > 0 && r.mxfp4_bytes_per_second > 0)
    f.compute_seconds = static_cast<double>(bf16_bytes) / r.bf16_bytes_per_second +
                        static_cast<double>(mxfp4_bytes) / r.mxfp4_bytes_per_second;
  // Unknown (0) unless both parts are known: a missing rate must not pass for a fast disk.
  const bool io_known = f.bytes_per_token() == 0 || r.disk_bytes_per_second > 0;
  const bool compute_known = f.compute_seconds > 0;
  f.seconds_per_token = io_known && compute_known ? std::max(f.io_seconds, f.compute_seconds) : 0;
}

}  // namespace k3::doctor
