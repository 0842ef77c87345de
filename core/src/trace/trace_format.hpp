// The byte layout of a trace file (documented in k3/trace.hpp): little-endian encoding of
// the header and records, shared by the writer and the reader.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <k3/trace.hpp>

namespace k3::trace_format {

inline constexpr char kMagic[8] = {'K', '3', 'T', 'R', 'A', 'C', 'E', '\0'};

inline void put_u16(unsigned char* p, std::uint16_t v) noexcept {
  p[0] = static_cast<unsigned char>(v);
  p[1] = static_cast<unsigned char>(v >> 8);
}
inline void put_u32(unsigned char* p, std::uint32_t v) noexcept {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
inline void put_u64(unsigned char* p, std::uint64_t v) noexcept {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
inline std::uint16_t get_u16(const unsigned char* p) noexcept { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }
inline std::uint32_t get_u32(const unsigned char* p) noexcept {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline std::uint64_t get_u64(const unsigned char* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

using HeaderBytes = std::array<unsigned char, kTraceHeaderBytes>;

inline HeaderBytes encode_header(const TraceHeader& h, std::uint64_t checksum) noexcept {
  HeaderBytes b{};
  std::memcpy(b.data(), kMagic, sizeof kMagic);
  put_u32(b.data() + 8, kTraceVersion);
  put_u32(b.data() + 12, static_cast<std::uint32_t>(kTraceHeaderBytes));
  put_u32(b.data() + 16, h.layers);
  put_u32(b.data() + 20, h.experts_per_layer);
  put_u32(b.data() + 24, h.top_k);
  put_u32(b.data() + 28, static_cast<std::uint32_t>(kTraceRecordBytes));
  put_u64(b.data() + 32, h.arch_fingerprint);
  put_u64(b.data() + 40, h.prompt_hash);
  put_u64(b.data() + 48, h.expert_bytes);
  put_u64(b.data() + 56, h.record_count);
  put_u64(b.data() + 64, checksum);
  put_u64(b.data() + 72, h.checkpoint_identity);
  return b;
}

/// Version 2: the position (< kTraceGroupBit) with the group bit on a group's first record.
inline void encode_record(unsigned char* p, const TraceRecord& r) noexcept {
  put_u32(p, r.position | (r.starts_group ? kTraceGroupBit : 0u));
  put_u16(p + 4, r.layer);
  put_u16(p + 6, r.expert);
}

/// `version` 1 has no group bit (starts_group is left false; the reader groups afterwards).
inline TraceRecord decode_record(const unsigned char* p, std::uint32_t version) noexcept {
  const std::uint32_t word = get_u32(p);
  if (version < 2) return {word, get_u16(p + 4), get_u16(p + 6), false};
  return {word & ~kTraceGroupBit, get_u16(p + 4), get_u16(p + 6), (word & kTraceGroupBit) != 0};
}

}  // namespace k3::trace_format
