#include "model/tensor_table.hpp"

#include <k3/error.hpp>

namespace k3::table {

const TensorInfo& require(const CheckpointIndex& index, const Entry& e) {
  const TensorInfo* t = index.find(e.name);
  if (t == nullptr || !e.dtypes.has(t->dtype)) {
    if (t == nullptr) (void)index.require(e.name, e.release, e.shape);  // the "missing" message
    throw UsageError(index.files()[t->file].uri + ": tensor '" + t->name + "': dtype " +
                     to_string(t->dtype) + ", expected " + e.dtypes.describe());
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

}  // namespace k3::table
