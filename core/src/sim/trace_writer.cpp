// TraceWriter: buffered, checksummed, written under a temporary name and renamed on close.
#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <k3/error.hpp>
#include <k3/trace.hpp>

#include "sim/trace_format.hpp"

namespace k3 {

namespace {
constexpr std::size_t kBufferRecords = 1 << 16;  // 512 KiB of records per write()

std::string errno_text() { return std::strerror(errno); }

void write_all(int fd, const unsigned char* p, std::size_t n, const std::string& what) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw RuntimeError(what + ": write failed: " + errno_text());
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}
}  // namespace

struct TraceWriter::Impl {
  std::filesystem::path file;
  std::string tmp;
  TraceHeader header;
  int fd = -1;
  std::vector<unsigned char> buffer;
  XXH64_state_t* hash = nullptr;
  std::uint64_t count = 0;
  bool group_next = true;  // the first record starts a group
  std::uint16_t group_layer = 0;
  bool closed = false;

  ~Impl() {
    if (hash != nullptr) XXH64_freeState(hash);
    if (fd >= 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
    }
  }

  void flush() {
    if (buffer.empty()) return;
    XXH64_update(hash, buffer.data(), buffer.size());
    write_all(fd, buffer.data(), buffer.size(), tmp);
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
  impl_->tmp = name + ".tmp." + std::to_string(::getpid());
  impl_->header = header;
  impl_->header.record_count = 0;
  impl_->hash = XXH64_createState();
  if (impl_->hash == nullptr) throw RuntimeError(name + ": cannot allocate the checksum state");
  XXH64_reset(impl_->hash, 0);
  impl_->fd = ::open(impl_->tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (impl_->fd < 0) throw RuntimeError(impl_->tmp + ": cannot create: " + errno_text());
  // Placeholder header (count 0); close() rewrites it with the real count and checksum.
  const auto head = trace_format::encode_header(impl_->header, 0);
  write_all(impl_->fd, head.data(), head.size(), impl_->tmp);
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
  const auto head = trace_format::encode_header(w.header, XXH64_digest(w.hash));
  if (::pwrite(w.fd, head.data(), head.size(), 0) != static_cast<ssize_t>(head.size()))
    throw RuntimeError(w.tmp + ": cannot write the trace header: " + errno_text());
  if (::fsync(w.fd) != 0) throw RuntimeError(w.tmp + ": cannot flush: " + errno_text());
  const int fd = w.fd;
  w.fd = -1;
  if (::close(fd) != 0) {
    ::unlink(w.tmp.c_str());
    throw RuntimeError(w.tmp + ": cannot close: " + errno_text());
  }
  if (::rename(w.tmp.c_str(), w.file.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(w.tmp.c_str());
    throw RuntimeError(w.file.string() + ": cannot rename the temporary trace into place: " + why);
  }
  const std::filesystem::path dir = w.file.has_parent_path() ? w.file.parent_path() : ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
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
