// The checkpoint layout of a geometry: the tensor table (model/tensor_table.hpp) grouped and
// ordered as make-model writes it.
#include <k3/error.hpp>
#include <k3/geometry.hpp>

#include "model/tensor_table.hpp"

namespace k3 {

std::uint64_t TensorSpec::nbytes() const {
  std::uint64_t n = element_size(dtype);
  for (auto d : shape) n *= d;
  return n;
}

std::uint64_t TensorGroup::nbytes() const {
  std::uint64_t n = 0;
  for (const auto& t : tensors) n += t.nbytes();
  return n;
}


namespace {

using U = std::uint64_t;

/// Collects table entries into a group in the layout's dtypes.
struct GroupBuilder {
  TensorGroup g;
  DTypeMix mix;
  void operator()(const table::Entry& e, const auto& /*field*/) {
    g.tensors.push_back({e.name, e.dtype_in(mix), e.shape, e.dtypes, e.part, e.form == table::Form::vector});
  }
};

}  // namespace

std::string DTypeSet::describe() const {
  std::string s;
  for (DType t : {DType::bf16, DType::f32, DType::u8, DType::f16, DType::i32, DType::i64, DType::f64, DType::i8,
                  DType::u16, DType::i16})
    if (has(t)) s += (s.empty() ? "" : " or ") + std::string(to_string(t));
  return s;
}

const char* to_string(DTypeMix m) noexcept {
  switch (m) {
    case DTypeMix::compact: return "compact";
    case DTypeMix::f32: return "f32";
    case DTypeMix::release: break;
  }
  return "release";
}

DTypeMix parse_dtype_mix(std::string_view text, const std::string& what) {
  for (DTypeMix m : {DTypeMix::release, DTypeMix::compact, DTypeMix::f32})
    if (text == to_string(m)) return m;
  throw UsageError(what + ": '" + std::string(text) + "' is not a dtype mix (release, compact or f32)");
}

void for_each_tensor_group(const ModelConfig& c, const std::function<void(TensorGroup&&)>& fn, DTypeMix mix) {
  {
    GroupBuilder b{{TensorGroup::Kind::embedding, -1, -1, {}}, mix};
    table::for_each_embedding_tensor(c, b);
    fn(std::move(b.g));
  }
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    GroupBuilder trunk{{TensorGroup::Kind::layer_trunk, i, -1, {}}, mix};
    table::for_each_layer_tensor(c, i, trunk);
    fn(std::move(trunk.g));
    if (!c.is_dense(i))
      for (std::int64_t e = 0; e < c.num_experts; ++e) {
        GroupBuilder x{{TensorGroup::Kind::routed_expert, i, e, {}}, mix};
        table::for_each_expert_tensor(c, i, e, x);
        fn(std::move(x.g));
      }
  }
  GroupBuilder head{{TensorGroup::Kind::output, -1, -1, {}}, mix};
  table::for_each_head_tensor(c, head);
  fn(std::move(head.g));
}

std::vector<TensorGroup> checkpoint_layout(const ModelConfig& c, DTypeMix mix) {
  std::vector<TensorGroup> groups;
  for_each_tensor_group(
      c, [&](TensorGroup&& g) { groups.push_back(std::move(g)); }, mix);
  return groups;
}

GeometryCensus geometry_census(const ModelConfig& c, DTypeMix mix) {
  GeometryCensus s;
  for_each_tensor_group(
      c,
      [&](TensorGroup&& g) {
    for (const auto& t : g.tensors) {
      ++s.tensors;
      const U b = t.nbytes();
      s.bytes += b;
      if (g.kind != TensorGroup::Kind::routed_expert) {
        s.params += b / element_size(t.dtype);
      } else if (t.name.ends_with("weight_packed")) {
        s.params += 2 * b;  // two 4-bit codes per byte
        s.expert_params += 2 * b;
      }
      if (g.kind == TensorGroup::Kind::routed_expert) s.expert_bytes += b;
    }
    if (g.kind == TensorGroup::Kind::routed_expert) s.bytes_per_expert = g.nbytes();
      },
      mix);
  return s;
}

}  // namespace k3
