// read_trace: validates a trace file completely before handing it out.
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <k3/error.hpp>
#include <k3/trace.hpp>

#include "cache/trace_format.hpp"

namespace k3 {

Trace read_trace(const std::filesystem::path& file) {
  namespace tf = trace_format;
  const std::string name = file.string();
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  if (ec) throw UsageError(name + ": cannot read the trace: " + ec.message());
  std::ifstream in(file, std::ios::binary);
  if (!in) throw UsageError(name + ": cannot open the trace: " + std::strerror(errno));

  tf::HeaderBytes head{};
  if (size < 8) throw UsageError(name + ": not a k3host trace (" + std::to_string(size) + " bytes, no magic)");
  in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(std::min<std::uintmax_t>(size, head.size())));
  if (std::memcmp(head.data(), tf::kMagic, sizeof tf::kMagic) != 0)
    throw UsageError(name + ": not a k3host trace (the magic is not \"K3TRACE\\0\")");
  if (size < kTraceHeaderBytes)
    throw UsageError(name + ": truncated header: " + std::to_string(size) + " of " + std::to_string(kTraceHeaderBytes) +
                     " bytes");
  const std::uint32_t version = tf::get_u32(head.data() + 8);
  if (version != kTraceVersion)
    throw UsageError(name + ": trace version " + std::to_string(version) + " is not supported (this build reads version " +
                     std::to_string(kTraceVersion) + ")");
  const std::uint32_t header_bytes = tf::get_u32(head.data() + 12);
  const std::uint32_t record_bytes = tf::get_u32(head.data() + 28);
  if (header_bytes != kTraceHeaderBytes || record_bytes != kTraceRecordBytes)
    throw UsageError(name + ": header says " + std::to_string(header_bytes) + "-byte header and " +
                     std::to_string(record_bytes) + "-byte records; version 1 has " + std::to_string(kTraceHeaderBytes) +
                     " and " + std::to_string(kTraceRecordBytes));

  Trace t;
  TraceHeader& h = t.header;
  h.layers = tf::get_u32(head.data() + 16);
  h.experts_per_layer = tf::get_u32(head.data() + 20);
  h.top_k = tf::get_u32(head.data() + 24);
  h.arch_fingerprint = tf::get_u64(head.data() + 32);
  h.prompt_hash = tf::get_u64(head.data() + 40);
  h.expert_bytes = tf::get_u64(head.data() + 48);
  h.record_count = tf::get_u64(head.data() + 56);
  const std::uint64_t checksum = tf::get_u64(head.data() + 64);
  if (h.layers == 0 || h.layers > 65536 || h.experts_per_layer == 0 || h.experts_per_layer > 65536)
    throw UsageError(name + ": bad geometry in the header: " + std::to_string(h.layers) + " layers, " +
                     std::to_string(h.experts_per_layer) + " experts per layer");

  const std::uint64_t body = size - kTraceHeaderBytes;
  if (h.record_count > body / kTraceRecordBytes)
    throw UsageError(name + ": truncated: the header says " + std::to_string(h.record_count) + " records (" +
                     std::to_string(h.record_count * kTraceRecordBytes) + " bytes) but only " + std::to_string(body) +
                     " bytes follow the header");
  if (body != h.record_count * kTraceRecordBytes)
    throw UsageError(name + ": record count mismatch: the header says " + std::to_string(h.record_count) +
                     " records but " + std::to_string(body) + " bytes follow the header (" +
                     std::to_string(body / kTraceRecordBytes) + " records" +
                     (body % kTraceRecordBytes != 0 ? " and a partial one)" : ")"));

  std::vector<unsigned char> bytes(static_cast<std::size_t>(body));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!in) throw UsageError(name + ": short read of the trace records");
  if (XXH64(bytes.data(), bytes.size(), 0) != checksum)
    throw UsageError(name + ": checksum mismatch: the records are corrupt");

  t.records.resize(static_cast<std::size_t>(h.record_count));
  for (std::size_t i = 0; i < t.records.size(); ++i) {
    const TraceRecord r = tf::decode_record(bytes.data() + i * kTraceRecordBytes);
    if (r.layer >= h.layers || r.expert >= h.experts_per_layer)
      throw UsageError(name + ": record " + std::to_string(i) + " (layer " + std::to_string(r.layer) + ", expert " +
                       std::to_string(r.expert) + ") is outside the geometry (" + std::to_string(h.layers) +
                       " layers x " + std::to_string(h.experts_per_layer) + " experts)");
    t.records[i] = r;
  }
  return t;
}

}  // namespace k3
