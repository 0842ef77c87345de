#include "maths/blocks/blocks.hpp"

namespace k3::maths {

namespace {
/// The resident view, or the split layer's row-chunk stream.
void multiply(const Ops& ops, const Matrix& w, StreamedMatrix* streamed, const float* x, std::size_t T, float* out) {
  if (streamed != nullptr)
    streamed->matmul(ops, x, T, out);
  else
    ops.matmul(w, x, T, out);
}
}  // namespace

void dense_mlp(const Ops& ops, const ModelConfig& c, const DenseMlpWeights& w, const float* x, std::size_t T,
               float* out, DenseBuffers& b) {
  // Dense layer (docs/model-spec.md §3): y = W_d · SiTU(W_g x, W_u x).
  const auto DI = static_cast<std::size_t>(c.intermediate_size);
  float* g = b.g.data();
  float* u = b.u.data();
  multiply(ops, w.gate_proj, w.gate_stream, x, T, g);
  multiply(ops, w.up_proj, w.up_stream, x, T, u);
  for (std::size_t i = 0; i < T * DI; ++i)
    g[i] = situ(g[i], u[i], c.activation_situ_beta, c.activation_situ_linear_beta);
  multiply(ops, w.down_proj, w.down_stream, g, T, out);
}

}  // namespace k3::maths
