// Encoding a safetensors header (synth/safetensors_write.hpp).
#include <cstdio>

#include "synth/safetensors_write.hpp"

namespace k3::detail {
namespace {

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  out += '"';
}

}  // namespace

std::string encode_safetensors_header(std::span<const TensorSpec* const> tensors) {
  std::string json = "{\"__metadata__\":{\"format\":\"pt\"}";
  std::uint64_t offset = 0;
  for (const TensorSpec* t : tensors) {
    json += ',';
    append_json_string(json, t->name);
    json += ":{\"dtype\":\"";
    json += to_string(t->dtype);
    json += "\",\"shape\":[";
    for (std::size_t i = 0; i < t->shape.size(); ++i) {
      if (i) json += ',';
      json += std::to_string(t->shape[i]);
    }
    const std::uint64_t end = offset + t->nbytes();
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
  }
  json += '}';
  while ((8 + json.size()) % 8 != 0) json += ' ';  // data starts 8-byte aligned
  std::string out(8, '\0');
  const std::uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + json;
}

}  // namespace k3::detail
