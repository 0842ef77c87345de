// Where the tensors of one safetensors shard lie, from its header (read once per file through
// the inner backend): name, dtype, shape and absolute byte range of each, sorted by offset.
// Only what the fill needs is checked (ranges inside the file, not overlapping); the host's
// own checkpoint index validates the header fully.
#pragma once
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>

#include <k3/json_depth.hpp>

#include "fill_rules.hpp"

namespace k3::storage::synthetic {

struct TensorEntry {
  std::string name;
  Dtype dtype = Dtype::other;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0;  ///< absolute offset in the file
  std::uint64_t end = 0;
};

/// Parses the header JSON of a shard whose data section starts at `data_start` in a file of
/// `file_size` bytes. Throws std::runtime_error saying what is wrong.
inline std::vector<TensorEntry> parse_header(std::string_view json, std::uint64_t data_start, std::uint64_t file_size) {
  if (const auto deep = sdk::json_too_deep(json)) throw std::runtime_error(sdk::json_depth_message("header", *deep));
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(json);
  simdjson::dom::object root;
  if (auto err = parser.parse(padded).get(root); err)
    throw std::runtime_error(std::string("header is not a JSON object (") + simdjson::error_message(err) + ")");
  std::vector<TensorEntry> out;
  for (auto [key, value] : root) {
    if (key == "__metadata__") continue;
    TensorEntry t;
    t.name = std::string(key);
    std::string_view dtype;
    simdjson::dom::array shape, offsets;
    if (value["dtype"].get(dtype) || value["shape"].get(shape) || value["data_offsets"].get(offsets) ||
        offsets.size() != 2)
      throw std::runtime_error("tensor '" + t.name + "': expected dtype, shape and data_offsets [begin, end]");
    t.dtype = parse_dtype(dtype);
    for (auto d : shape) {
      std::uint64_t v = 0;
      if (d.get(v)) throw std::runtime_error("tensor '" + t.name + "': shape is not a list of non-negative integers");
      t.shape.push_back(v);
    }
    std::uint64_t a = 0, b = 0;
    if (offsets.at(0).get(a) || offsets.at(1).get(b) || b < a || b > file_size - data_start)
      throw std::runtime_error("tensor '" + t.name + "': data_offsets outside the file");
    if (a == b) continue;  // an empty tensor has no bytes to fill
    t.begin = data_start + a;
    t.end = data_start + b;
    out.push_back(std::move(t));
  }
  std::sort(out.begin(), out.end(), [](const TensorEntry& x, const TensorEntry& y) { return x.begin < y.begin; });
  for (std::size_t i = 1; i < out.size(); ++i)
    if (out[i].begin < out[i - 1].end)
      throw std::runtime_error("tensors '" + out[i - 1].name + "' and '" + out[i].name + "' overlap");
  return out;
}

}  // namespace k3::storage::synthetic
