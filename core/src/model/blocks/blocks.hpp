// One function per block of K3-MODEL.md §3. Each takes a chunk of T tokens laid out
// [T, width] row-major; tokens are independent except where the block carries state
// (KDA recurrence, MLA cache), which is walked in token order. Math only: no I/O, no
// cache or dispatch decisions (experts arrive through an ExpertSource).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include <k3/model_config.hpp>

#include "model/ops.hpp"
#include "model/scratch.hpp"
#include "model/state.hpp"
#include "model/weights.hpp"

namespace k3::model {

/// AttnRes aggregation AR(rows; proj, norm) for ONE token: rows = [bank_0 … bank_{n-1}, P],
/// each [E]. out [E].
void attn_res(const Ops& ops, std::span<const float* const> rows, const std::vector<float>& norm_w,
              const std::vector<float>& proj_w, double eps, std::size_t E, float* out, Scratch& s);

/// KDA over T tokens (x already input-normed) → out [T, E]; updates `state`.
void kda(const Ops& ops, const ModelConfig& c, const KdaWeights& w, KdaState& state, const float* x,
         std::size_t T, float* out, Scratch& s);

/// MLA over T tokens at positions [pos0, pos0+T) → out [T, E]; appends to `cache`.
void mla(const Ops& ops, const ModelConfig& c, const MlaWeights& w, MlaCache& cache, std::int64_t pos0,
         const float* x, std::size_t T, float* out, Scratch& s);

/// Where routed experts come from. The resident source hands out pointers; a streaming
/// source reads the misses as one batch and holds leases until release().
class ExpertSource {
 public:
  virtual ~ExpertSource() = default;
  /// Makes the experts of `layer` listed in `ids` available; out[i] belongs to ids[i].
  virtual void acquire(std::size_t layer, std::span<const std::uint32_t> ids, std::span<ExpertWeights> out) = 0;
  /// Ends the use of everything acquired for `layer`.
  virtual void release(std::size_t layer) = 0;
};

/// Observes every expert request (token position, layer, expert) in request order.
class RoutingObserver {
 public:
  virtual ~RoutingObserver() = default;
  virtual void on_route(std::int64_t position, std::size_t layer, std::span<const std::uint32_t> experts) = 0;
};

/// Router + Stable LatentMoE + shared experts over T tokens → out [T, E].
void latent_moe(const Ops& ops, const ModelConfig& c, std::size_t layer, const MoeWeights& w,
                ExpertSource& experts, RoutingObserver* observer, std::int64_t pos0, const float* x,
                std::size_t T, float* out, Scratch& s);

/// Dense SiTU MLP over T tokens → out [T, E].
void dense_mlp(const Ops& ops, const ModelConfig& c, const DenseMlpWeights& w, const float* x, std::size_t T,
               float* out, Scratch& s);

/// Slots used by the blocks in Scratch (each block owns a range).
namespace slot {
enum : std::size_t {
  attn_res_scores = 0,
  attn_res_fold,
  kda_q = 8, kda_k, kda_v, kda_fa, kda_z, kda_b, kda_g, kda_y, kda_alpha, kda_u, kda_bk,
  mla_ql = 24, mla_q, mla_ckv, mla_gate, mla_y, mla_qlat, mla_scores, mla_cbar, mla_acc,
  moe_logits = 40, moe_z, moe_contrib, moe_gather, moe_h1, moe_h3, moe_out, moe_r, moe_sh1, moe_sh2, moe_weights,
  moe_ids, moe_choice, moe_rows,
  dense_g = 60, dense_u,
};
}  // namespace slot

}  // namespace k3::model
