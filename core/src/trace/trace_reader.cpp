// read_trace: validates a trace file completely before handing it out.
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <k3/error.hpp>
#include <k3/trace.hpp>
#include <k3/user_files.hpp>

#include "trace/trace_format.hpp"

namespace k3 {

namespace {

struct Opened {
  std::ifstream in;
  std::uint64_t size = 0;
  std::uint32_t version = 0;
  std::uint64_t checksum = 0;
  std::size_t header_bytes = 0;  ///< where the records start
  TraceHeader header;
};

/// Opens `file` and validates everything up to the records: magic, version, sizes,
/// geometry, and the record count against the file size.
Opened open_trace(const std::filesystem::path& file) {
  namespace tf = trace_format;
  const std::string name = file.string();
  Opened o;
  // A regular file of at most kTraceMaxFileBytes, checked before it is opened.
  o.size = check_input_file(file, "", "trace", kTraceMaxFileBytes);
  o.in.open(file, std::ios::binary);
  if (!o.in) throw UsageError(name + ": cannot open the trace: " + std::strerror(errno));

  tf::HeaderBytes head{};
  if (o.size < 8) throw UsageError(name + ": not a k3host trace (" + std::to_string(o.size) + " bytes, no magic)");
  o.in.read(reinterpret_cast<char*>(head.data()),
            static_cast<std::streamsize>(std::min<std::uint64_t>(o.size, head.size())));
  if (std::memcmp(head.data(), tf::kMagic, sizeof tf::kMagic) != 0)
    throw UsageError(name + ": not a k3host trace (the magic is not \"K3TRACE\\0\")");
  if (o.size < kTraceHeaderBytesV2)
    throw UsageError(name + ": truncated header: " + std::to_string(o.size) + " of " +
                     std::to_string(kTraceHeaderBytesV2) + " bytes");
  o.version = tf::get_u32(head.data() + 8);
  if (o.version < 1 || o.version > kTraceVersion)
    throw UsageError(name + ": trace version " + std::to_string(o.version) +
                     " is not supported (this build reads versions 1 to " + std::to_string(kTraceVersion) + ")");
  const std::uint32_t header_bytes = tf::get_u32(head.data() + 12);
  const std::uint32_t record_bytes = tf::get_u32(head.data() + 28);
  const std::size_t expected_header = o.version >= 3 ? kTraceHeaderBytes : kTraceHeaderBytesV2;
  if (header_bytes != expected_header || record_bytes != kTraceRecordBytes)
    throw UsageError(name + ": header says " + std::to_string(header_bytes) + "-byte header and " +
                     std::to_string(record_bytes) + "-byte records; version " + std::to_string(o.version) + " has " +
                     std::to_string(expected_header) + " and " + std::to_string(kTraceRecordBytes));
  if (o.size < expected_header)
    throw UsageError(name + ": truncated header: " + std::to_string(o.size) + " of " + std::to_string(expected_header) +
                     " bytes");
  o.header_bytes = expected_header;

  TraceHeader& h = o.header;
  h.layers = tf::get_u32(head.data() + 16);
  h.experts_per_layer = tf::get_u32(head.data() + 20);
  h.top_k = tf::get_u32(head.data() + 24);
  h.arch_fingerprint = tf::get_u64(head.data() + 32);
  h.prompt_hash = tf::get_u64(head.data() + 40);
  h.expert_bytes = tf::get_u64(head.data() + 48);
  h.record_count = tf::get_u64(head.data() + 56);
  o.checksum = tf::get_u64(head.data() + 64);
  if (o.version >= 3) h.checkpoint_identity = tf::get_u64(head.data() + 72);
  if (h.layers == 0 || h.layers > 65536 || h.experts_per_layer == 0 || h.experts_per_layer > 65536)
    throw UsageError(name + ": bad geometry in the header: " + std::to_string(h.layers) + " layers, " +
                     std::to_string(h.experts_per_layer) + " experts per layer");
  if (h.top_k == 0 || h.top_k > h.experts_per_layer)
    throw UsageError(name + ": bad geometry in the header: top-" + std::to_string(h.top_k) + " of " +
                     std::to_string(h.experts_per_layer) + " experts per layer");

  const std::uint64_t body = o.size - o.header_bytes;
  if (h.record_count > body / kTraceRecordBytes)
    throw UsageError(name + ": truncated: the header says " + std::to_string(h.record_count) + " records (" +
                     std::to_string(h.record_count * kTraceRecordBytes) + " bytes) but only " + std::to_string(body) +
                     " bytes follow the header");
  if (body != h.record_count * kTraceRecordBytes)
    throw UsageError(name + ": record count mismatch: the header says " + std::to_string(h.record_count) +
                     " records but " + std::to_string(body) + " bytes follow the header (" +
                     std::to_string(body / kTraceRecordBytes) + " records" +
                     (body % kTraceRecordBytes != 0 ? " and a partial one)" : ")"));
  return o;
}

}  // namespace

TraceHeader read_trace_header(const std::filesystem::path& file) { return open_trace(file).header; }

Trace read_trace(const std::filesystem::path& file) {
  namespace tf = trace_format;
  const std::string name = file.string();
  Opened o = open_trace(file);
  Trace t;
  t.header = o.header;
  const TraceHeader& h = t.header;

  std::vector<unsigned char> bytes(static_cast<std::size_t>(o.size - o.header_bytes));
  o.in.seekg(static_cast<std::streamoff>(o.header_bytes));
  o.in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!o.in) throw UsageError(name + ": short read of the trace records");
  if (XXH64(bytes.data(), bytes.size(), 0) != o.checksum)
    throw UsageError(name + ": checksum mismatch: the records are corrupt");

  t.records.resize(static_cast<std::size_t>(h.record_count));
  for (std::size_t i = 0; i < t.records.size(); ++i) {
    const TraceRecord r = tf::decode_record(bytes.data() + i * kTraceRecordBytes, o.version);
    if (r.layer >= h.layers || r.expert >= h.experts_per_layer)
      throw UsageError(name + ": record " + std::to_string(i) + " (layer " + std::to_string(r.layer) + ", expert " +
                       std::to_string(r.expert) + ") is outside the geometry (" + std::to_string(h.layers) +
                       " layers x " + std::to_string(h.experts_per_layer) + " experts)");
    if (o.version >= 2) {
      if (i == 0 && !r.starts_group)
        throw UsageError(name + ": record 0 does not start a serving group (the group bit is missing)");
      if (i > 0 && !r.starts_group && r.layer != t.records[i - 1].layer)
        throw UsageError(name + ": record " + std::to_string(i) + " (layer " + std::to_string(r.layer) +
                         ") joins a serving group of layer " + std::to_string(t.records[i - 1].layer) +
                         " (a group is one layer's requests)");
    }
    t.records[i] = r;
  }
  if (o.version < 2) group_by_token_layer(t);
  return t;
}

void group_by_token_layer(Trace& trace) noexcept {
  auto& r = trace.records;
  for (std::size_t i = 0; i < r.size(); ++i)
    r[i].starts_group = i == 0 || r[i].position != r[i - 1].position || r[i].layer != r[i - 1].layer;
}

std::uint64_t trace_prompt_hash(std::span<const std::uint32_t> prompt_ids) noexcept {
  std::vector<unsigned char> bytes(prompt_ids.size() * 4);
  for (std::size_t i = 0; i < prompt_ids.size(); ++i) trace_format::put_u32(bytes.data() + 4 * i, prompt_ids[i]);
  return XXH64(bytes.data(), bytes.size(), 0);
}

namespace {
std::string hex(std::uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}
}  // namespace

void require_trace_of_run(const std::filesystem::path& file, const TraceHeader& recorded, const TraceHeader& run,
                          bool compare_prompt) {
  const std::string name = file.string();
  auto differs = [&](const char* what, const std::string& was, const std::string& is) {
    throw UsageError(name + ": the trace is of another " + what + ": recorded with " + was + ", this run has " + is);
  };
  if (recorded.layers != run.layers)
    differs("geometry", std::to_string(recorded.layers) + " layers", std::to_string(run.layers));
  if (recorded.experts_per_layer != run.experts_per_layer)
    differs("geometry", std::to_string(recorded.experts_per_layer) + " experts per layer",
            std::to_string(run.experts_per_layer));
  if (recorded.top_k != run.top_k)
    differs("geometry", "top-" + std::to_string(recorded.top_k), "top-" + std::to_string(run.top_k));
  if (recorded.arch_fingerprint != run.arch_fingerprint)
    differs("model", "architecture fingerprint " + hex(recorded.arch_fingerprint), hex(run.arch_fingerprint));
  // The same architecture is not the same weights (a fine-tune, a new revision routes
  // differently): a run that knows its checkpoint wants a trace of that checkpoint.
  if (run.checkpoint_identity != 0 && recorded.checkpoint_identity != run.checkpoint_identity) {
    if (recorded.checkpoint_identity == 0)
      throw UsageError(name +
                       ": the trace records no checkpoint identity (generated, or written by an older k3host), "
                       "so it cannot be tied to this run's checkpoint (identity " +
                       hex(run.checkpoint_identity) + "); record it again with --set trace.out=FILE");
    differs("checkpoint", "checkpoint identity " + hex(recorded.checkpoint_identity),
            hex(run.checkpoint_identity) + " (record the trace again with this checkpoint: --set trace.out=FILE)");
  }
  if (compare_prompt && recorded.prompt_hash != run.prompt_hash)
    differs("prompt", "prompt hash " + hex(recorded.prompt_hash),
            hex(run.prompt_hash) + " (record the trace again with this prompt: --set trace.out=FILE)");
}

}  // namespace k3
