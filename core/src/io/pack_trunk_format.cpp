// Helpers shared by the trunk writer and reader (see pack_trunk_format.hpp).
#include "io/pack_trunk_format.hpp"

#include <xxhash.h>

#include <charconv>
#include <cstdio>
#include <memory>
#include <vector>

#include <k3/error.hpp>

#include "io/pack_trunk_codec.hpp"

namespace k3::trunk_format {

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
  struct StateFree {
    void operator()(XXH64_state_t* s) const noexcept { XXH64_freeState(s); }
  };
  const std::unique_ptr<XXH64_state_t, StateFree> state(XXH64_createState());
  if (!state) throw std::bad_alloc();
  XXH64_reset(state.get(), 0);
  std::vector<std::byte> buffer(static_cast<std::size_t>(length < kChunk ? length : kChunk));
  for (std::uint64_t done = 0; done < length;) {
    const std::uint64_t n = length - done < kChunk ? length - done : kChunk;
    sdk::ReadRequest request{offset + done, n, buffer.data()};
    const sdk::Status st = file.read({&request, 1});
    if (!st.ok()) throw RuntimeError(what + ": " + st.detail);
    XXH64_update(state.get(), buffer.data(), static_cast<std::size_t>(n));
    done += n;
    if (progress) progress(n);
  }
  return XXH64_digest(state.get());
}

std::uint64_t decoded_hash(sdk::StorageFile& file, const std::string& what, const PackedRun& run) {
  struct StateFree {
    void operator()(XXH64_state_t* s) const noexcept { XXH64_freeState(s); }
  };
  const std::unique_ptr<XXH64_state_t, StateFree> state(XXH64_createState());
  if (!state) throw std::bad_alloc();
  XXH64_reset(state.get(), 0);
  static constexpr std::byte kZeros[kTrunkTensorAlign] = {};
  trunk_codec::Decoder decoder;
  trunk_codec::FileInput::Buffers staging;
  trunk_codec::ReadAhead ahead;
  std::vector<std::byte> out;
  std::uint64_t position = 0;  // in the decoded run; the reader checked the tensors lie back to back
  for (const PackedTensor& t : run.tensors) {
    XXH64_update(state.get(), kZeros, static_cast<std::size_t>(t.offset - position));
    out.resize(static_cast<std::size_t>(t.nbytes));
    const std::uint64_t begin = run.file_offset + t.coded_offset;
    trunk_codec::FileInput in(file, begin, begin + t.coded_bytes, staging, kChunk, &ahead);
    try {
      if (decoder.decode(in, out, t.dtype == DType::bf16) != t.coded_bytes)
        throw trunk_codec::CodecError("the stream is shorter than its coded_bytes");
    } catch (const trunk_codec::CodecError& e) {
      throw RuntimeError(what + ": run '" + run.name + "', tensor '" + t.name + "': damaged coded stream: " + e.what());
    } catch (const RuntimeError& e) {
      throw RuntimeError(what + ": run '" + run.name + "', tensor '" + t.name + "': " + e.what());
    }
    XXH64_update(state.get(), out.data(), out.size());
    position = t.offset + t.nbytes;
  }
  return XXH64_digest(state.get());
}

}  // namespace k3::trunk_format
