// Writing the safetensors container (the reader is io/safetensors.hpp): a shard's header
// for make-model, from the tensor table's specs.
#pragma once
#include <span>
#include <string>

#include <k3/geometry.hpp>

namespace k3::detail {

/// The bytes before a shard's data: length prefix + JSON, padded with spaces so the data
/// starts 8-byte aligned (as the safetensors library does). Offsets follow the given order,
/// packed without gaps.
std::string encode_safetensors_header(std::span<const TensorSpec* const> tensors);

}  // namespace k3::detail
