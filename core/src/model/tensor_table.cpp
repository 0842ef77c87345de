#include "model/tensor_table.hpp"

#include <algorithm>
#include <array>

#include <k3/error.hpp>

namespace k3::table {

const TensorInfo& require(const CheckpointIndex& index, const Entry& e) {
  const TensorInfo* t = index.find(e.name);
  if (t == nullptr || !e.dtypes.has(t->dtype)) {
    if (t == nullptr) (void)index.require(e.name, e.release, e.shape);  // the "missing" message
    throw UsageError(index.files()[t->file].uri + ": tensor '" + t->name + "': dtype " + to_string(t->dtype) +
                     ", expected " + e.dtypes.describe());
  }
  if (!e.alt_shape.empty() && t->shape == e.alt_shape) return *t;
  return index.require(e.name, t->dtype, e.shape);  // the shape message names the expected shape
}

const TensorInfo& require_layer_tensor(const CheckpointIndex& index, const ModelConfig& c, std::int64_t i,
                                       std::string_view suffix) {
  const std::string name = tensor_names::layer(i, suffix);
  const TensorInfo* found = nullptr;
  for_each_layer_tensor(c, i, [&](const Entry& e, const auto&) {
    if (e.name == name) found = &require(index, e);
  });
  if (found == nullptr) throw UsageError("layer " + std::to_string(i) + " has no tensor '" + name + "'");
  return *found;
}

namespace {

/// One layer index of each kind present in the model, with how many layers are of that kind.
struct LayerKind {
  std::int64_t example = -1;
  std::uint64_t count = 0;
};

/// [mla][dense]: the kinds of layer. Found without visiting every layer: the MLA layers are
/// listed, the dense layers are the first first_k_dense_replace.
std::array<std::array<LayerKind, 2>, 2> layer_kinds(const ModelConfig& c) {
  std::array<std::array<LayerKind, 2>, 2> k{};
  const auto n = static_cast<std::uint64_t>(c.num_hidden_layers);
  const auto dense =
      static_cast<std::uint64_t>(std::clamp<std::int64_t>(c.first_k_dense_replace, 0, c.num_hidden_layers));
  std::uint64_t mla_dense = 0;
  for (const std::int64_t i : c.mla_layers) {
    LayerKind& kind = k[1][c.is_dense(i) ? 1 : 0];
    if (kind.example < 0) kind.example = i;
    ++kind.count;
    mla_dense += c.is_dense(i) ? 1 : 0;
  }
  const std::uint64_t mla_moe = c.mla_layers.size() - mla_dense;
  k[0][1].count = dense - mla_dense;
  k[0][0].count = (n - dense) - mla_moe;
  // The first KDA layer of each range: the MLA list is sorted, so skip over its run.
  auto first_kda = [&](std::int64_t from, std::int64_t to) {
    for (std::int64_t i = from; i < to; ++i)
      if (!c.is_mla(i)) return i;
    return std::int64_t{-1};
  };
  if (k[0][1].count > 0) k[0][1].example = first_kda(0, static_cast<std::int64_t>(dense));
  if (k[0][0].count > 0) k[0][0].example = first_kda(static_cast<std::int64_t>(dense), c.num_hidden_layers);
  return k;
}

}  // namespace

std::uint64_t declared_tensor_count(const ModelConfig& c) {
  std::uint64_t total = 0;
  auto count = [&](const Entry&, const auto&) { ++total; };
  for (const auto& by_dense : layer_kinds(c))
    for (const LayerKind& kind : by_dense) {
      if (kind.count == 0) continue;
      std::uint64_t per_layer = 0;
      for_each_layer_tensor(c, kind.example, [&](const Entry&, const auto&) { ++per_layer; });
      total += per_layer * kind.count;
    }
  const auto moe_layers = static_cast<std::uint64_t>(
      c.num_hidden_layers - std::clamp<std::int64_t>(c.first_k_dense_replace, 0, c.num_hidden_layers));
  if (moe_layers > 0) {
    std::uint64_t per_expert = 0;
    for_each_expert_tensor(c, c.first_k_dense_replace, 0, [&](const Entry&, const auto&) { ++per_expert; });
    total += moe_layers * static_cast<std::uint64_t>(c.num_experts) * per_expert;
  }
  for_each_embedding_tensor(c, count);
  for_each_head_tensor(c, count);
  return total;
}

void require_declared_geometry(const CheckpointIndex& index, const ModelConfig& c) {
  const std::uint64_t declared = declared_tensor_count(c);
  if (declared > index.tensors().size())
    throw UsageError(index.uri() + ": config.json declares a model of " + std::to_string(declared) + " tensors (" +
                     std::to_string(c.num_hidden_layers) + " layers, " + std::to_string(c.num_experts) +
                     " experts per MoE layer) but the checkpoint's shards hold " +
                     std::to_string(index.tensors().size()) + ": config.json and the shards do not match");
  auto check = [&](const Entry& e, const auto&) { (void)require(index, e); };
  for (const auto& by_dense : layer_kinds(c))
    for (const LayerKind& kind : by_dense)
      if (kind.count > 0) for_each_layer_tensor(c, kind.example, check);
  if (c.first_k_dense_replace < c.num_hidden_layers) {
    for_each_expert_tensor(c, c.first_k_dense_replace, 0, check);
    for_each_expert_tensor(c, c.num_hidden_layers - 1, c.num_experts - 1, check);
  }
  for_each_embedding_tensor(c, check);
  for_each_head_tensor(c, check);
}

}  // namespace k3::table
