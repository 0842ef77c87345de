// The one tensor table (model/tensor_table.hpp): what every dtype mix writes, the dtypes
// each tensor accepts, the MXFP4 byte shapes of odd widths, and the parts of the model.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>

#include <k3/error.hpp>
#include <k3/geometry.hpp>

#include "model/tensor_table.hpp"

namespace {

k3::ModelConfig tiny() { return k3::load_geometry(std::string(K3_SOURCE_DIR) + "/configs/models/tiny.yaml").config; }

/// Suffix after "layers.N." (or the whole name for globals) → dtype, over the layout.
std::map<std::string, k3::DType> dtypes_of(const k3::ModelConfig& c, k3::DTypeMix mix) {
  std::map<std::string, k3::DType> out;
  k3::for_each_tensor_group(
      c,
      [&](k3::TensorGroup&& g) {
    if (g.kind == k3::TensorGroup::Kind::routed_expert) return;
    for (const auto& t : g.tensors) {
      std::string key = t.name;
      if (g.layer >= 0) key = key.substr(key.find('.', key.find("layers.") + 7) + 1);
      out[key] = t.dtype;
    }
      },
      mix);
  return out;
}

}  // namespace

TEST_CASE("release mix: F32 exactly where the release stores F32, BF16 elsewhere", "[model][table]") {
  const auto c = tiny();
  const std::set<std::string> f32 = {"self_attn.q_conv1d.weight",
                                     "self_attn.k_conv1d.weight",
                                     "self_attn.v_conv1d.weight",
                                     "self_attn.A_log",
                                     "self_attn.dt_bias",
                                     "self_attn.o_norm.weight",
                                     "block_sparse_moe.gate.e_score_correction_bias"};
  const auto release = dtypes_of(c, k3::DTypeMix::release);
  std::set<std::string> seen_f32;
  for (const auto& [name, t] : release) {
    CAPTURE(name);
    if (t == k3::DType::f32)
      seen_f32.insert(name);
    else
      CHECK(t == k3::DType::bf16);
  }
  CHECK(seen_f32 == f32);
  for (const auto& [name, t] : dtypes_of(c, k3::DTypeMix::compact)) {
    CAPTURE(name);
    CHECK(t == k3::DType::bf16);
  }
  for (const auto& [name, t] : dtypes_of(c, k3::DTypeMix::f32)) {
    CAPTURE(name);
    CHECK(t == k3::DType::f32);
  }
}

TEST_CASE("every tensor but the routed experts accepts BF16 and F32, experts only U8", "[model][table]") {
  const auto c = tiny();
  std::size_t floats = 0, bytes = 0;
  for (const auto& g : k3::checkpoint_layout(c))
    for (const auto& t : g.tensors) {
      CAPTURE(t.name);
      const bool expert = g.kind == k3::TensorGroup::Kind::routed_expert;
      CHECK(t.dtypes.has(k3::DType::bf16) == !expert);
      CHECK(t.dtypes.has(k3::DType::f32) == !expert);
      CHECK(t.dtypes.has(k3::DType::u8) == expert);
      CHECK((t.part == k3::TensorPart::expert) == expert);
      CHECK_FALSE(t.dtypes.has(k3::DType::i32));
      (expert ? bytes : floats) += 1;
    }
  CHECK(floats > 0);
  CHECK(bytes > 0);
  CHECK(k3::DTypeSet(k3::DType::bf16).describe() == "BF16");
  CHECK((k3::DTypeSet(k3::DType::bf16) | k3::DTypeSet(k3::DType::f32)).describe() == "BF16 or F32");
}

TEST_CASE("groups: embedding, each layer's trunk (dense FFN marked), experts, the head", "[model][table]") {
  const auto c = tiny();
  const auto groups = k3::checkpoint_layout(c);
  REQUIRE(groups.front().kind == k3::TensorGroup::Kind::embedding);
  CHECK(groups.front().tensors.at(0).part == k3::TensorPart::embedding);
  REQUIRE(groups.back().kind == k3::TensorGroup::Kind::output);
  for (const auto& t : groups.back().tensors) CHECK(t.part == k3::TensorPart::head);
  std::size_t dense_ffn = 0;
  for (const auto& g : groups)
    if (g.kind == k3::TensorGroup::Kind::layer_trunk)
      for (const auto& t : g.tensors) {
        CAPTURE(t.name);
        const bool ffn = t.name.find(".mlp.") != std::string::npos;
        CHECK((t.part == k3::TensorPart::dense_ffn) == ffn);
        CHECK((t.part == k3::TensorPart::trunk) == !ffn);
        if (ffn) CHECK(c.is_dense(g.layer));
        dense_ffn += ffn ? 1 : 0;
        // Vectors (widened once at load) are 1-D, [1, E] or the [P, 1, K] convolution kernels.
        const bool vector_shape = t.shape.size() == 1 || t.shape[0] == 1 || t.shape.size() == 3;
        CHECK(t.vector == vector_shape);
      }
  CHECK(dense_ffn == 3 * static_cast<std::size_t>(c.first_k_dense_replace));
}

TEST_CASE("MXFP4 bytes round odd widths up: ceil(cols/2) codes, ceil(cols/32) scales", "[model][table]") {
  STATIC_REQUIRE(k3::table::mxfp4_packed_cols(64) == 32);
  STATIC_REQUIRE(k3::table::mxfp4_packed_cols(33) == 17);
  STATIC_REQUIRE(k3::table::mxfp4_scale_cols(64) == 2);
  STATIC_REQUIRE(k3::table::mxfp4_scale_cols(33) == 2);
  STATIC_REQUIRE(k3::table::mxfp4_scale_cols(1) == 1);
  auto c = tiny();
  c.moe_intermediate_size = 33;      // I: the columns of w2
  c.routed_expert_hidden_size = 47;  // L: the columns of w1, w3
  std::map<std::string, std::pair<k3::table::Shape, std::uint64_t>> got;
  k3::table::for_each_expert_tensor(c, c.first_k_dense_replace, 0, [&](const k3::table::Entry& e, const auto&) {
    got[e.name.substr(e.name.find("experts.0.") + 10)] = {e.shape, e.logical_cols};
  });
  using S = k3::table::Shape;
  CHECK(got.at("w1.weight_packed") == std::pair{S{33, 24}, std::uint64_t{47}});
  CHECK(got.at("w1.weight_scale") == std::pair{S{33, 2}, std::uint64_t{47}});
  CHECK(got.at("w2.weight_packed") == std::pair{S{47, 17}, std::uint64_t{33}});
  CHECK(got.at("w2.weight_scale") == std::pair{S{47, 2}, std::uint64_t{33}});
  CHECK(got.at("w3.weight_packed") == std::pair{S{33, 24}, std::uint64_t{47}});
  // The layout make-model writes uses the same rounding.
  for (const auto& g : k3::checkpoint_layout(c))
    if (g.kind == k3::TensorGroup::Kind::routed_expert) {
      CHECK(g.tensors.at(0).shape == S{33, 24});
      CHECK(g.tensors.at(2).shape == S{47, 17});
      break;
    }
}

TEST_CASE("dtype mixes parse by name, anything else is refused naming where", "[model][table]") {
  CHECK(k3::parse_dtype_mix("release", "x") == k3::DTypeMix::release);
  CHECK(k3::parse_dtype_mix("compact", "x") == k3::DTypeMix::compact);
  CHECK(k3::parse_dtype_mix("f32", "x") == k3::DTypeMix::f32);
  CHECK_THROWS_WITH(k3::parse_dtype_mix("bf16", "g.yaml:3:10: writer.dtypes"),
                    Catch::Contains("g.yaml:3:10: writer.dtypes") && Catch::Contains("release, compact or f32"));
}

TEST_CASE("the declared tensor count, counted per kind of layer, equals a walk over every tensor", "[model][table]") {
  for (const char* name : {"tiny", "tiny2", "tiny-top1", "demo", "k3"}) {
    CAPTURE(name);
    const auto c = k3::load_geometry(std::string(K3_SOURCE_DIR) + "/configs/models/" + name + ".yaml").config;
    std::uint64_t walked = 0;
    k3::for_each_tensor_group(
        c, [&](k3::TensorGroup&& g) { walked += g.tensors.size(); }, k3::DTypeMix::release);
    CHECK(k3::table::declared_tensor_count(c) == walked);
  }
}
