#include "model/blocks/blocks.hpp"

namespace k3::model {

void dense_mlp(const Ops& ops, const ModelConfig& c, const DenseMlpWeights& w, const float* x, std::size_t T,
               float* out, Scratch& s) {
  // Dense layer (K3-MODEL.md §3): y = W_d · SiTU(W_g x, W_u x).
  const auto DI = static_cast<std::size_t>(c.intermediate_size);
  float* g = s.f(slot::dense_g, T * DI);
  float* u = s.f(slot::dense_u, T * DI);
  ops.matmul(w.gate_proj, x, T, g);
  ops.matmul(w.up_proj, x, T, u);
  for (std::size_t i = 0; i < T * DI; ++i)
    g[i] = situ(g[i], u[i], c.activation_situ_beta, c.activation_situ_linear_beta);
  ops.matmul(w.down_proj, g, T, out);
}

}  // namespace k3::model
