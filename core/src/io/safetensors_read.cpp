// Reading and validating one safetensors header (simdjson on-demand: the full K3 has ~78 MB
// of headers, so no DOM is built). Every number from the file is checked before use.
#include <algorithm>
#include <cstring>

#include <simdjson.h>

#include <k3/error.hpp>
#include <k3/json_depth.hpp>

#include "io/safetensors.hpp"
#include "io/small_file.hpp"

namespace k3::io {
namespace {

namespace od = simdjson::ondemand;

struct Context {
  std::string file;
  [[noreturn]] void fail(const std::string& what) const { throw UsageError(file + ": " + what); }
  [[noreturn]] void fail(std::string_view tensor, const std::string& what) const {
    throw UsageError(file + ": tensor '" + std::string(tensor) + "': " + what);
  }
  [[noreturn]] void json(std::string_view tensor, simdjson::error_code e) const {
    if (tensor.empty()) fail(std::string("header is not valid JSON (") + simdjson::error_message(e) + ")");
    fail(tensor, std::string("header entry is not valid JSON (") + simdjson::error_message(e) + ")");
  }
};

// Reads a JSON array of unsigned integers into `out` (cleared first).
void read_u64_array(od::value v, const Context& cx, std::string_view name, const char* key,
                    std::vector<std::uint64_t>& out) {
  od::array arr;
  if (auto e = v.get_array().get(arr); e) cx.fail(name, std::string(key) + " must be an array of integers");
  out.clear();
  for (auto item : arr) {
    std::uint64_t x = 0;
    if (auto e = item.get_uint64().get(x); e) cx.fail(name, std::string(key) + " must hold non-negative integers");
    out.push_back(x);
  }
}

// The 8-byte little-endian header length, checked against the file size and
// kMaxSafetensorsHeader before anything is read with it.
std::uint64_t read_header_length(sdk::StorageFile& file, const std::string& uri, const Context& cx,
                                 std::uint64_t file_size) {
  unsigned char len_bytes[8];
  if (file_size < 8)
    cx.fail("too short for a safetensors file (" + std::to_string(file_size) +
            " bytes; the 8-byte header length is missing)");
  io::read_exact(file, 0, 8, len_bytes, uri);
  std::uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | len_bytes[i];
  if (hlen < 2 || hlen > kMaxSafetensorsHeader)
    cx.fail("implausible header length " + std::to_string(hlen) + " (allowed 2.." +
            std::to_string(kMaxSafetensorsHeader) + ")");
  if (hlen > file_size - 8)
    cx.fail("header length " + std::to_string(hlen) + " runs past the end of the file (" + std::to_string(file_size) +
            " bytes)");
  return hlen;
}

// One tensor entry's members: "dtype", "shape" and "data_offsets" (into `offsets`), each
// required; others are ignored. Apart from read_safetensors_header: the walk over members.
void read_entry_fields(od::object& entry, const Context& cx, TensorInfo& t, std::vector<std::uint64_t>& offsets) {
  bool have_dtype = false, have_shape = false, have_offsets = false;
  for (auto f : entry) {
    std::string_view k;
    if (auto e = f.unescaped_key().get(k); e) cx.json(t.name, e);
    od::value v;
    if (auto e = f.value().get(v); e) cx.json(t.name, e);
    if (k == "dtype") {
      std::string_view s;
      if (auto e = v.get_string().get(s); e) cx.fail(t.name, "dtype must be a string");
      const auto d = parse_safetensors_dtype(s);
      if (!d) cx.fail(t.name, "unknown dtype '" + std::string(s) + "'");
      t.dtype = *d;
      have_dtype = true;
    } else if (k == "shape") {
      read_u64_array(v, cx, t.name, "shape", t.shape);
      have_shape = true;
    } else if (k == "data_offsets") {
      read_u64_array(v, cx, t.name, "data_offsets", offsets);
      have_offsets = true;
    }
  }
  if (!have_dtype) cx.fail(t.name, "dtype is missing");
  if (!have_shape) cx.fail(t.name, "shape is missing");
  if (!have_offsets) cx.fail(t.name, "data_offsets is missing");
}

// Places a tensor at its data_offsets: a forward span inside the data (which starts at
// `base`), as many bytes as its shape x dtype, rank at most 8. Sets t.offset and t.nbytes.
void place_entry(const Context& cx, TensorInfo& t, const std::vector<std::uint64_t>& offsets, std::uint64_t base,
                 std::uint64_t data_size, std::uint64_t file_size) {
  if (offsets.size() != 2) cx.fail(t.name, "data_offsets must be [begin, end]");
  if (t.shape.size() > 8) cx.fail(t.name, "rank " + std::to_string(t.shape.size()) + " is above 8");
  if (offsets[0] > offsets[1])
    cx.fail(t.name,
            "data_offsets [" + std::to_string(offsets[0]) + ", " + std::to_string(offsets[1]) + "] run backwards");
  std::uint64_t bytes = element_size(t.dtype);
  for (auto d : t.shape)
    if (__builtin_mul_overflow(bytes, d, &bytes)) cx.fail(t.name, "shape overflows 64 bits");
  const std::uint64_t span = offsets[1] - offsets[0];
  if (bytes != span) {
    std::string shape;
    for (auto d : t.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    cx.fail(t.name, "shape [" + shape + "] x " + std::to_string(element_size(t.dtype)) +
                        " B = " + std::to_string(bytes) + " bytes, but data_offsets span " + std::to_string(span));
  }
  if (offsets[1] > data_size)
    cx.fail(t.name, "data ends at byte " + std::to_string(base + offsets[1]) + ", past the end of the file (" +
                        std::to_string(file_size) + " bytes)");
  t.offset = base + offsets[0];
  t.nbytes = span;
}

// No two tensors of this shard (out[first...]) may share bytes: sort the non-empty spans
// and compare neighbours.
void check_no_shared_bytes(const Context& cx, const std::vector<TensorInfo>& out, std::size_t first) {
  std::vector<std::size_t> order;
  order.reserve(out.size() - first);
  for (std::size_t i = first; i < out.size(); ++i)
    if (out[i].nbytes > 0) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return out[a].offset < out[b].offset; });
  for (std::size_t i = 1; i < order.size(); ++i) {
    const auto& prev = out[order[i - 1]];
    const auto& cur = out[order[i]];
    if (cur.offset < prev.offset + prev.nbytes && cur.name == prev.name) cx.fail(cur.name, "duplicate name");
    if (cur.offset < prev.offset + prev.nbytes)
      cx.fail(cur.name, "bytes [" + std::to_string(cur.offset) + ", " + std::to_string(cur.offset + cur.nbytes) +
                            ") overlap tensor '" + prev.name + "'");
  }
}

}  // namespace

std::optional<DType> parse_safetensors_dtype(std::string_view s) noexcept {
  if (s == "BF16") return DType::bf16;
  if (s == "F32") return DType::f32;
  if (s == "U8") return DType::u8;
  if (s == "F16") return DType::f16;
  if (s == "I32") return DType::i32;
  if (s == "I64") return DType::i64;
  if (s == "F64") return DType::f64;
  if (s == "I8") return DType::i8;
  if (s == "U16") return DType::u16;
  if (s == "I16") return DType::i16;
  return std::nullopt;
}

std::uint64_t read_safetensors_header(sdk::StorageFile& file, const std::string& uri, std::uint32_t file_index,
                                      std::vector<char>& buffer, std::vector<TensorInfo>& out) {
  const Context cx{uri};
  const std::uint64_t file_size = file.size();
  const std::uint64_t hlen = read_header_length(file, uri, cx, file_size);

  // The caller's buffer is reused from shard to shard (fresh pages cost more than the parse
  // on virtual machines); simdjson reads up to SIMDJSON_PADDING bytes past the JSON.
  const std::size_t need = static_cast<std::size_t>(hlen) + simdjson::SIMDJSON_PADDING;
  if (buffer.size() < need) buffer.resize(need);
  io::read_exact(file, 8, hlen, buffer.data(), uri);
  std::memset(buffer.data() + hlen, 0, simdjson::SIMDJSON_PADDING);
  const simdjson::padded_string_view header(buffer.data(), static_cast<std::size_t>(hlen), buffer.size());
  const std::uint64_t base = 8 + hlen;
  const std::uint64_t data_size = file_size - base;

  if (const auto deep = sdk::json_too_deep({buffer.data(), static_cast<std::size_t>(hlen)}))
    throw UsageError(sdk::json_depth_message(uri + ": header", 8 + *deep));
  od::parser parser;
  od::document doc;
  if (auto e = parser.iterate(header).get(doc); e) cx.json({}, e);
  od::object top;
  if (auto e = doc.get_object().get(top); e) cx.fail("header is not a JSON object");

  const std::size_t first = out.size();
  std::vector<std::uint64_t> offsets;  // reused: no allocation per tensor
  for (auto field : top) {
    std::string_view key_view;
    if (auto e = field.unescaped_key().get(key_view); e) cx.json({}, e);
    std::string name(key_view);
    od::value value;
    if (auto e = field.value().get(value); e) cx.json(name, e);
    if (name == "__metadata__") {  // free-form string map; not ours to interpret
      od::object meta;
      if (auto e = value.get_object().get(meta); e) cx.fail("__metadata__ must be a JSON object");
      continue;  // on-demand skips the unread members
    }
    od::object entry;
    if (auto e = value.get_object().get(entry); e) cx.fail(name, "header entry must be a JSON object");

    TensorInfo t;
    t.name = std::move(name);
    t.file = file_index;
    read_entry_fields(entry, cx, t, offsets);
    place_entry(cx, t, offsets, base, data_size, file_size);
    out.push_back(std::move(t));
  }
  // current_location() is OUT_OF_BOUNDS exactly when every token has been consumed.
  if (doc.current_location().error() != simdjson::OUT_OF_BOUNDS) cx.fail("trailing content after the header JSON");
  check_no_shared_bytes(cx, out, first);
  return hlen;
}

}  // namespace k3::io
