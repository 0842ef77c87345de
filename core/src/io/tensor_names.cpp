// The released checkpoint's tensor names (k3/checkpoint.hpp, tensor_names; docs/model-spec.md
// §2): what the tensor table, the checkpoint identity's samples and make-model agree on.
#include <k3/checkpoint.hpp>

#include <string>

namespace k3 {

namespace tensor_names {

std::string layer(std::int64_t layer, std::string_view suffix) {
  std::string s(kModel);
  s += "layers.";
  s += std::to_string(layer);
  s += '.';
  s += suffix;
  return s;
}

bool is_routed_expert(std::string_view name) noexcept {
  return name.starts_with(kModel) && name.find(".block_sparse_moe.experts.") != std::string_view::npos;
}

std::string expert(std::int64_t layer_index, std::int64_t expert_id, int w, bool scale) {
  std::string s = layer(layer_index, "block_sparse_moe.experts.");
  s += std::to_string(expert_id);
  s += ".w";
  s += static_cast<char>('0' + w);
  s += scale ? ".weight_scale" : ".weight_packed";
  return s;
}

}  // namespace tensor_names

}  // namespace k3
