#include "streaming/layer_loader.hpp"

#include <array>
#include <cstring>
#include <type_traits>
#include <utility>

#include <k3/error.hpp>

#include "model/tensor_table.hpp"
#include "streaming/tensor_reader.hpp"

namespace k3::streaming {
namespace {

constexpr std::uint64_t kNotWidened = ~std::uint64_t{0};

/// A queued tensor and the view it binds: the table's `field` applied to the weights.
/// `widened`: for a BF16 vector, the offset (in floats) of its fp32 copy in the layer's
/// widening area, when the loader placed one.
template <class Target>
struct Binding {
  std::size_t handle;
  bool vector;  ///< an F32Vector (else a Matrix)
  std::uint64_t widened = kNotWidened;
  void (*bind)(Target& target, const TensorInfo& info, const std::byte* p, float* widened);
};

/// Binds a tensor's bytes to its view by the view's type; the dtype was checked on queueing.
void bind_view(maths::Matrix& m, const TensorInfo& t, const std::byte* p, float* /*widened*/) {
  m = {p, t.shape[0], t.shape[1], t.dtype == DType::f32};
}
void bind_view(maths::F32Vector& v, const TensorInfo& t, const std::byte* p, float* widened) {
  const std::uint64_t n = t.nbytes / element_size(t.dtype);
  if (t.dtype == DType::f32)
    v.point(reinterpret_cast<const float*>(p), n);
  else if (widened != nullptr)
    v.widen_into(reinterpret_cast<const std::uint16_t*>(p), n, widened);  // exact, once per binding
  else
    v.widen(reinterpret_cast<const std::uint16_t*>(p), n);
}

/// Queues every tensor a walker of the table lists (checked against the checkpoint) and
/// records how each binds; `keep(entry)` filters.
template <class Target, class Walk, class Keep>
std::vector<Binding<Target>> queue_table(TensorReader& reader, Walk&& walk, Keep&& keep) {
  std::vector<Binding<Target>> out;
  walk([&](const table::Entry& e, auto field) {
    // The table's form and the field's view type are written on the same line; keep them
    // in step (the plan sizes by the form).
    using View = std::remove_reference_t<decltype(field(std::declval<Target&>()))>;
    if ((e.form == table::Form::matrix) != std::is_same_v<View, maths::Matrix>)
      throw RuntimeError("tensor table: '" + e.name + "' binds a view that is not its form");
    const TensorInfo& info = table::require(reader.index(), e);
    if (!keep(e)) return;
    out.push_back({reader.want(info), !std::is_same_v<View, maths::Matrix>, kNotWidened,
                   [](Target& target, const TensorInfo& t, const std::byte* p, float* widened) {
      bind_view(decltype(field){}(target), t, p, widened);
                   }});
  });
  return out;
}

}  // namespace

/// One layer as queue() planned it: read once, rebound at every read_and_bind().
struct LayerLoader::Layer {
  bool planned = false;
  bool with_experts = false;
  bool without_dense_ffn = false;
  ReadPlan read;
  std::vector<Binding<maths::LayerWeights>> trunk;
  /// Per expert, its six tensors in table order (w1, w2, w3 × packed, scale).
  std::vector<std::array<std::size_t, 6>> experts;
  std::uint64_t widened = 0;  ///< floats the fp32 copies of its BF16 vectors take
};

LayerLoader::LayerLoader(const ModelConfig& c, TensorReader& reader)
    : c_(c), reader_(reader), layers_(static_cast<std::size_t>(c.num_hidden_layers)) {}
LayerLoader::~LayerLoader() = default;

std::uint64_t LayerLoader::queue(std::size_t li, bool with_experts, bool without_dense_ffn) {
  layer_ = li;
  Layer& L = layers_.at(li);
  if (L.planned && L.with_experts == with_experts && L.without_dense_ffn == without_dense_ffn) return L.read.bytes;
  L = Layer{};
  reader_.clear();
  const auto i = static_cast<std::int64_t>(li);
  // A split layer's FFN is streamed in row chunks; its tensors are checked here all the same.
  L.trunk = queue_table<maths::LayerWeights>(
      reader_, [&](auto&& visit) { table::for_each_layer_tensor(c_, i, visit); },
      [&](const table::Entry& e) { return !(without_dense_ffn && e.part == TensorPart::dense_ffn); });
  if (with_experts && !c_.is_dense(i)) {
    L.experts.resize(static_cast<std::size_t>(c_.num_experts));
    for (std::int64_t x = 0; x < c_.num_experts; ++x) {
      std::size_t k = 0;
      table::for_each_expert_tensor(c_, i, x, [&](const table::Entry& e, const auto&) {
        L.experts[static_cast<std::size_t>(x)][k++] = reader_.want(table::require(reader_.index(), e));
      });
    }
  }
  L.read = reader_.plan();
  reader_.clear();
  // Where each BF16 vector's fp32 copy goes in the caller's widening memory (see
  // read_and_bind()), each 16-byte aligned like a heap block.
  for (auto& b : L.trunk) {
    const TensorInfo& t = *L.read.tensors[b.handle].info;
    if (!b.vector || t.dtype == DType::f32) continue;
    b.widened = L.widened;
    L.widened += (t.nbytes / element_size(t.dtype) + 3) / 4 * 4;
  }
  L.with_experts = with_experts;
  L.without_dense_ffn = without_dense_ffn;
  L.planned = true;
  return L.read.bytes;
}

std::uint64_t LayerLoader::widened_floats() const { return layers_.at(layer_).widened; }

void LayerLoader::read_and_bind(std::byte* base, maths::LayerWeights& lw, std::span<float> widening) {
  const Layer& L = layers_.at(layer_);
  float* widened = widening.size() >= L.widened ? widening.data() : nullptr;
  reader_.read(L.read, base);
  const auto i = static_cast<std::int64_t>(layer_);
  lw = maths::LayerWeights{};
  lw.mla = c_.is_mla(i);
  lw.dense = c_.is_dense(i);
  for (const auto& b : L.trunk)
    b.bind(lw, *L.read.tensors[b.handle].info, L.read.data(base, b.handle),
           widened == nullptr || b.widened == kNotWidened ? nullptr : widened + b.widened);
  lw.experts.resize(L.experts.size());
  for (std::size_t x = 0; x < L.experts.size(); ++x) {
    std::size_t k = 0;
    table::for_each_expert_tensor(c_, i, static_cast<std::int64_t>(x), [&](const table::Entry& e, auto field) {
      sdk::Mxfp4Matrix& m = field(lw.experts[x]);
      const auto* p = reinterpret_cast<const std::uint8_t*>(L.read.data(base, L.experts[x][k++]));
      (e.form == table::Form::mxfp4_packed ? m.packed : m.scales) = p;
      m.rows = e.shape[0];
      m.cols = e.logical_cols;
    });
  }
}

maths::GlobalWeights load_global(const ModelConfig& c, TensorReader& reader, bool tables,
                                 std::vector<AlignedBuffer>& keep) {
  return load_global(c, reader, tables, tables, keep);
}

maths::GlobalWeights load_global(const ModelConfig& c, TensorReader& reader, bool embedding, bool head,
                                 std::vector<AlignedBuffer>& keep) {
  maths::GlobalWeights global;
  reader.clear();
  // The embedding table and lm_head only with `tables` (checked either way).
  const auto bindings = queue_table<maths::GlobalWeights>(
      reader,
      [&](auto&& visit) {
    table::for_each_embedding_tensor(c, visit);
    table::for_each_head_tensor(c, visit);
      },
      [&](const table::Entry& e) {
    if (e.form != table::Form::matrix) return true;
    return e.name == tensor_names::kLmHead ? head : embedding;
  });
  keep.push_back(reader.read_all());
  for (const auto& b : bindings) b.bind(global, reader.info(b.handle), reader.data(keep.back(), b.handle), nullptr);
  reader.clear();
  return global;
}

ResidentWeights::ResidentWeights(const ModelConfig& c, const CheckpointIndex& index, sdk::StorageBackend& storage,
                                 const PackedLocations* packed)
    : ResidentWeights(c, index, storage, packed, 0, static_cast<std::size_t>(c.num_hidden_layers)) {}

ResidentWeights::ResidentWeights(const ModelConfig& c, const CheckpointIndex& index, sdk::StorageBackend& storage,
                                 const PackedLocations* packed, std::size_t first, std::size_t last) {
  TensorReader reader(index, storage, packed);
  const auto layers = static_cast<std::size_t>(c.num_hidden_layers);
  global_ = load_global(c, reader, first == 0, last == layers, buffers_);
  LayerLoader loader(c, reader);
  layers_.resize(layers);
  for (std::size_t li = first; li < last; ++li) {
    buffers_.emplace_back(loader.queue(li, true));
    loader.read_and_bind(buffers_.back().data(), layers_[li]);
  }
  reader.clear();
  bytes_read_ = reader.bytes_read();
  verify_ns_ = reader.verify_ns();
}

}  // namespace k3::streaming
