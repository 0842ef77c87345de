// TraceWriter: buffered, checksummed, written under a temporary name and renamed on close.
#include <xxhash.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <k3/error.hpp>
#include <k3/trace.hpp>

#include "trace/trace_format.hpp"
#include "util/atomic_file.hpp"

namespace k3 {

namespace {
constexpr std::size_t kBufferRecords = 1 << 16;  // 512 KiB of records per write()
}  // namespace

struct TraceWriter::Impl {
  std::filesystem::path file;
  TraceHeader header;
  std::optional<AtomicFile> out;  // removed unless close() commits it
  std::vector<unsigned char> buffer;
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> hash{nullptr, &XXH64_freeState};
  std::uint64_t count = 0;
  bool group_next = true;  // the first record starts a group
  std::uint16_t group_layer = 0;
  bool closed = false;

  void flush() {
    if (buffer.empty()) return;
    XXH64_update(hash.get(), buffer.data(), buffer.size());
    out->write(buffer.data(), buffer.size());
    buffer.clear();
  }
};

TraceWriter::TraceWriter(std::filesystem::path file, const TraceHeader& header) : impl_(std::make_unique<Impl>()) {
  const std::string name = file.string();
  if (header.layers == 0 || header.layers > 65536)
    throw UsageError(name + ": a trace holds 1 to 65536 layers, got " + std::to_string(header.layers));
  if (header.experts_per_layer == 0 || header.experts_per_layer > 65536)
    throw UsageError(name + ": a trace holds 1 to 65536 experts per layer, got " +
                     std::to_string(header.experts_per_layer));
  impl_->file = std::move(file);
  impl_->header = header;
  impl_->header.record_count = 0;
  impl_->hash.reset(XXH64_createState());
  if (!impl_->hash) throw RuntimeError(name + ": cannot allocate the checksum state");
  XXH64_reset(impl_->hash.get(), 0);
  impl_->out.emplace(impl_->file);
  // Placeholder header (count 0); close() rewrites it with the real count and checksum.
  const auto head = trace_format::encode_header(impl_->header, 0);
  impl_->out->write(head.data(), head.size());
  impl_->buffer.reserve(kBufferRecords * kTraceRecordBytes);
}

TraceWriter::~TraceWriter() = default;

void TraceWriter::begin_group() noexcept { impl_->group_next = true; }

void TraceWriter::add(std::int64_t position, std::size_t layer, std::uint32_t expert) {
  Impl& w = *impl_;
  if (w.closed) throw RuntimeError(w.file.string() + ": trace record added after close()");
  if (position < 0 || position > std::int64_t{kTraceMaxPosition})
    throw RuntimeError(w.file.string() + ": token position " + std::to_string(position) +
                       " does not fit the trace format (0 to " + std::to_string(kTraceMaxPosition) + ")");
  if (layer >= w.header.layers)
    throw RuntimeError(w.file.string() + ": layer " + std::to_string(layer) + " is outside the trace's " +
                       std::to_string(w.header.layers) + " layers");
  if (expert >= w.header.experts_per_layer)
    throw RuntimeError(w.file.string() + ": expert " + std::to_string(expert) + " is outside the trace's " +
                       std::to_string(w.header.experts_per_layer) + " experts per layer");
  if (layer != w.group_layer) w.group_next = true;  // a group is one layer's requests
  const std::size_t at = w.buffer.size();
  w.buffer.resize(at + kTraceRecordBytes);
  trace_format::encode_record(w.buffer.data() + at,
                              TraceRecord{static_cast<std::uint32_t>(position), static_cast<std::uint16_t>(layer),
                                          static_cast<std::uint16_t>(expert), w.group_next});
  w.group_next = false;
  w.group_layer = static_cast<std::uint16_t>(layer);
  ++w.count;
  if (w.buffer.size() >= kBufferRecords * kTraceRecordBytes) w.flush();
}

void TraceWriter::add_layer(std::int64_t position, std::size_t layer, std::span<const std::uint32_t> experts) {
  for (const std::uint32_t e : experts) add(position, layer, e);
}

void TraceWriter::close() {
  Impl& w = *impl_;
  if (w.closed) return;
  w.flush();
  w.header.record_count = w.count;
  const auto head = trace_format::encode_header(w.header, XXH64_digest(w.hash.get()));
  w.out->pwrite(head.data(), head.size(), 0);
  w.out->commit();
  w.closed = true;
}

std::uint64_t TraceWriter::records() const noexcept { return impl_->count; }
const std::filesystem::path& TraceWriter::file() const noexcept { return impl_->file; }

void write_trace(const std::filesystem::path& file, const Trace& trace) {
  TraceWriter w(file, trace.header);
  for (const TraceRecord& r : trace.records) {
    if (r.starts_group) w.begin_group();
    w.add(r.position, r.layer, r.expert);
  }
  w.close();
}

}  // namespace k3
