// Helpers shared by the trunk writer and reader (see pack_trunk_format.hpp).
#include "io/pack_trunk_format.hpp"

#include "io/xxh3.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <memory>
#include <vector>

#include <k3/error.hpp>

#include "io/pack_trunk_check.hpp"
#include "io/pack_trunk_codec.hpp"

namespace k3::io::trunk_format {
namespace {

struct StateFree {
  void operator()(XXH3_state_t* s) const noexcept { XXH3_freeState(s); }
};

void read_piece(sdk::StorageFile& file, const std::string& what, std::uint64_t offset, std::uint64_t n,
                std::byte* dest) {
  sdk::ReadRequest request{offset, n, dest};
  const sdk::Status st = file.read({&request, 1});
  if (!st.ok()) throw RuntimeError(what + ": " + st.detail);
}

}  // namespace

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool parse_hex64(std::string_view text, std::uint64_t& out) {
  if (text.size() != 16) return false;
  const auto res = std::from_chars(text.data(), text.data() + text.size(), out, 16);
  return res.ec == std::errc{} && res.ptr == text.data() + text.size();
}

bool parse_dtype(std::string_view text, DType& out) {
  for (const DType t : {DType::bf16, DType::f32, DType::u8, DType::f16, DType::i32, DType::i64, DType::f64, DType::i8,
                        DType::u16, DType::i16})
    if (text == to_string(t)) {
      out = t;
      return true;
    }
  return false;
}

std::uint64_t hash_range(sdk::StorageFile& file, const std::string& what, std::uint64_t offset, std::uint64_t length,
                         const std::function<void(std::uint64_t)>& progress) {
  const std::unique_ptr<XXH3_state_t, StateFree> state(XXH3_createState());
  if (!state) throw std::bad_alloc();
  XXH3_64bits_reset(state.get());
  std::vector<std::byte> buffer(static_cast<std::size_t>(length < kChunk ? length : kChunk));
  for (std::uint64_t done = 0; done < length;) {
    const std::uint64_t n = length - done < kChunk ? length - done : kChunk;
    read_piece(file, what, offset + done, n, buffer.data());
    XXH3_64bits_update(state.get(), buffer.data(), static_cast<std::size_t>(n));
    done += n;
    if (progress) progress(n);
  }
  return XXH3_64bits_digest(state.get());
}

std::uint64_t decoded_tensor_hash(sdk::StorageFile& file, const std::string& what, const PackedRun& run,
                                  const PackedTensor& t) {
  io::trunk_codec::Decoder decoder;
  io::trunk_codec::FileInput::Buffers staging;
  io::trunk_codec::ReadAhead ahead;
  std::vector<std::byte> out(static_cast<std::size_t>(t.nbytes));
  const std::uint64_t begin = run.file_offset + t.coded_offset;
  io::trunk_codec::FileInput in(file, begin, begin + t.coded_bytes, staging, kChunk, &ahead);
  try {
    if (decoder.decode(in, out, t.dtype == DType::bf16) != t.coded_bytes)
      throw io::trunk_codec::CodecError("the stream is shorter than its coded_bytes");
  } catch (const io::trunk_codec::CodecError& e) {
    throw RuntimeError(what + ": run '" + run.name + "', tensor '" + t.name + "': damaged coded stream: " + e.what());
  } catch (const RuntimeError& e) {
    throw RuntimeError(what + ": run '" + run.name + "', tensor '" + t.name + "': " + e.what());
  }
  return XXH3_64bits(out.data(), out.size());
}

void verify_run(sdk::StorageFile& file, const std::string& what, const PackedRun& run,
                std::span<const std::uint64_t> row_sums, const std::function<void(std::uint64_t)>& progress) {
  const auto run_differs = [&](std::uint64_t h) {
    return RuntimeError(what + ": run '" + run.name + "' at offset " + std::to_string(run.file_offset) + " has xxh3 " +
                        hex64(h) + ", trunk.json says " + hex64(run.xxh3));
  };
  if (run.coded()) {
    if (const std::uint64_t h = hash_range(file, what, run.file_offset, run.stored_bytes(), progress); h != run.xxh3)
      throw run_differs(h);
    for (const PackedTensor& t : run.tensors)
      if (const std::uint64_t d = decoded_tensor_hash(file, what, run, t); d != t.xxh3)
        throw RuntimeError(what + ": run '" + run.name + "', tensor '" + t.name + "' decodes to xxh3 " + hex64(d) +
                           ", trunk.json says " + hex64(t.xxh3));
    return;
  }
  // A raw run is read once, in pieces of whole rows where the tensor has row checksums:
  // the run's hash, each tensor's and each row's from the same bytes.
  const std::unique_ptr<XXH3_state_t, StateFree> run_state(XXH3_createState()), tensor_state(XXH3_createState());
  if (!run_state || !tensor_state) throw std::bad_alloc();
  XXH3_64bits_reset(run_state.get());
  std::vector<std::byte> buffer;
  std::uint64_t position = 0;  // in the run
  const auto read = [&](std::uint64_t at, std::uint64_t n) {
    buffer.resize(static_cast<std::size_t>(n));
    read_piece(file, what, run.file_offset + at, n, buffer.data());
    XXH3_64bits_update(run_state.get(), buffer.data(), buffer.size());
  };
  for (const PackedTensor& t : run.tensors) {
    if (t.offset > position) read(position, t.offset - position);  // the padding before it
    io::trunk_check::TensorCheck check{what,  run.name, t.name, run.file_offset + t.offset,
                                       false, t.xxh3,   {},     t.row_bytes()};
    const bool rows = t.row_sums >= 0 && check.row_bytes > 0;
    if (rows) check.rows = row_sums.subspan(static_cast<std::size_t>(t.row_sums), static_cast<std::size_t>(t.shape[0]));
    const std::uint64_t piece = rows ? std::max<std::uint64_t>(1, kChunk / check.row_bytes) * check.row_bytes : kChunk;
    XXH3_64bits_reset(tensor_state.get());
    for (std::uint64_t done = 0; done < t.nbytes;) {
      const std::uint64_t n = std::min(piece, t.nbytes - done);
      read(t.offset + done, n);
      XXH3_64bits_update(tensor_state.get(), buffer.data(), buffer.size());
      if (rows) check.rows_at(buffer.data(), done / check.row_bytes, n / check.row_bytes);
      done += n;
      if (progress) progress(n);
    }
    if (const std::uint64_t h = XXH3_64bits_digest(tensor_state.get()); h != t.xxh3)
      throw RuntimeError(what + ": run '" + run.name + "', tensor '" + t.name + "' at offset " +
                         std::to_string(check.offset) + " has xxh3 " + hex64(h) + ", trunk.json says " + hex64(t.xxh3));
    position = t.offset + t.nbytes;
  }
  if (run.nbytes > position) read(position, run.nbytes - position);
  if (const std::uint64_t h = XXH3_64bits_digest(run_state.get()); h != run.xxh3) throw run_differs(h);
}

}  // namespace k3::io::trunk_format
