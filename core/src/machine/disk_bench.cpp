// bench_disk(): random reads of one request size at 4096-aligned offsets, at several depths
// (requests in flight, one thread each), for a fixed time. O_DIRECT, so the page cache
// serves nothing, on the checkpoint's own files when they allow it; otherwise on a
// temporary file in the same folder. The checkpoint's pages in the page cache are never
// dropped (that would slow the user's next run): only the temporary file's are.
#include <fcntl.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include <k3/error.hpp>
#include <k3/machine.hpp>
#include <k3/units.hpp>

#include "util/aligned_buffer.hpp"
#include "util/atomic_file.hpp"
#include "util/owned_fd.hpp"

namespace k3::machine {

namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kAlign = 4096;
constexpr std::uint64_t kMinScratch = 8ull << 20;

std::uint64_t align_up(std::uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

struct Target {
  OwnedFd fd;
  fs::path path;
  std::uint64_t slots = 0;  ///< aligned offsets a whole request fits after
};

/// The files a pass reads, and how.
struct Span {
  std::vector<Target> targets;
  std::vector<std::uint64_t> ends;  ///< cumulative slots
  bool drop_after_read = false;     ///< buffered: drop each range from the page cache after it is read
  [[nodiscard]] std::uint64_t slots() const { return ends.empty() ? 0 : ends.back(); }
};

/// One read of `n` bytes at `offset`; the bytes read, or -errno.
long long read_at(int fd, void* buf, std::uint64_t n, std::uint64_t offset) {
  while (true) {
    const ssize_t r = ::pread(fd, buf, n, static_cast<off_t>(offset));
    if (r >= 0) return r;
    if (errno != EINTR) return -errno;
  }
}

std::uint64_t file_slots(std::uint64_t size, std::uint64_t request) {
  return size < request ? 0 : (size - request) / kAlign + 1;
}

void add_target(Span& span, OwnedFd fd, const fs::path& path, std::uint64_t slots) {
  span.ends.push_back(span.slots() + slots);
  span.targets.push_back({std::move(fd), path, slots});
}

/// The given files opened with O_DIRECT, each proven with one read; nullopt and the
/// reason when the file system refuses O_DIRECT.
std::optional<Span> open_direct(const std::vector<fs::path>& files, std::uint64_t request, std::string& why,
                                bool& refused) {
  Span span;
  AlignedBuffer probe(request);
  for (const auto& file : files) {
    OwnedFd fd(::open(file.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC));
    if (!fd) {
      if (errno == EINVAL) {
        why = "the file system of " + file.parent_path().string() + " does not support O_DIRECT";
        refused = true;
        return std::nullopt;
      }
      throw RuntimeError(file.string() + ": cannot open for the read test: " + std::strerror(errno));
    }
    const off_t size = ::lseek(fd.get(), 0, SEEK_END);
    const std::uint64_t slots = size < 0 ? 0 : file_slots(static_cast<std::uint64_t>(size), request);
    if (slots == 0) continue;  // smaller than one request
    const long long r = read_at(fd.get(), probe.data(), request, 0);
    if (r == -EINVAL) {
      why = "O_DIRECT reads of " + file.string() + " are refused (EINVAL)";
      refused = true;
      return std::nullopt;
    }
    if (r < 0) throw RuntimeError(file.string() + ": read failed at offset 0: " + std::strerror(static_cast<int>(-r)));
    add_target(span, std::move(fd), file, slots);
  }
  if (span.slots() == 0) {
    why = "no file is as large as one request";
    return std::nullopt;
  }
  return span;
}

/// A temporary file in `folder` that no name points at once this returns (O_TMPFILE, or
/// created and unlinked at once), filled with incompressible bytes, synced and dropped from
/// the page cache. `bytes` shrinks to a quarter of the free space when that is less.
OwnedFd scratch_file(const fs::path& folder, std::uint64_t& bytes, std::uint64_t request) {
  struct statvfs vfs {};
  if (::statvfs(folder.c_str(), &vfs) == 0) {
    const std::uint64_t free_bytes = static_cast<std::uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    if (bytes > free_bytes / 4) bytes = free_bytes / 4 / (1 << 20) * (1 << 20);
  }
  bytes = std::max(bytes, 4 * request);
  if (bytes < kMinScratch) bytes = kMinScratch;
  OwnedFd fd(::open(folder.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd) {  // no O_TMPFILE here: a hidden name, unlinked as soon as it exists
    const fs::path name = folder / (".k3host-doctor." + std::to_string(::getpid()) + ".tmp");
    LiveTemporary live(name);
    fd.reset(::open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
    if (!fd)
      throw RuntimeError(folder.string() +
                         ": cannot create a temporary file for the read test: " + std::strerror(errno));
    ::unlink(name.c_str());
    live.release();
  }
  std::vector<std::uint64_t> chunk((1u << 20) / sizeof(std::uint64_t));
  std::mt19937_64 rng(0x6b33);
  const std::string what = folder.string() + " (temporary test file)";
  for (std::uint64_t done = 0; done < bytes; done += 1u << 20) {
    for (auto& w : chunk) w = rng();  // incompressible: no file system or disk shortcut
    write_all(fd.get(), chunk.data(), std::min<std::uint64_t>(1u << 20, bytes - done), what);
  }
  if (::fdatasync(fd.get()) != 0) throw RuntimeError(what + ": sync failed: " + std::strerror(errno));
  (void)::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
  return fd;
}

/// Reads the temporary file with O_DIRECT where the file system allows it (fcntl may set
/// it on an open file), else buffered with each range dropped after it is read.
Span scratch_span(OwnedFd fd, const fs::path& folder, std::uint64_t bytes, std::uint64_t request, bool& direct) {
  Span span;
  direct = false;
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags >= 0 && ::fcntl(fd.get(), F_SETFL, flags | O_DIRECT) == 0) {
    AlignedBuffer probe(request);
    const long long r = read_at(fd.get(), probe.data(), request, 0);
    if (r >= 0)
      direct = true;
    else if (r != -EINVAL)
      throw RuntimeError(folder.string() +
                         ": reading the temporary test file failed: " + std::strerror(static_cast<int>(-r)));
    else
      (void)::fcntl(fd.get(), F_SETFL, flags);
  }
  span.drop_after_read = !direct;
  add_target(span, std::move(fd), folder / "(temporary file)", file_slots(bytes, request));
  return span;
}

/// One pass: `depth` threads reading random requests until `seconds` have passed.
DiskPass run_pass(const Span& span, std::uint64_t request, unsigned depth, double seconds) {
  std::atomic<std::uint64_t> requests{0}, bytes{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::string error;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline =
      start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  auto worker = [&](unsigned id) {
    AlignedBuffer buf(request);
    std::mt19937_64 rng(0x9e3779b97f4a7c15ull * (depth * 64 + id + 1));
    std::uniform_int_distribution<std::uint64_t> pick(0, span.slots() - 1);
    while (!failed.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < deadline) {
      const std::uint64_t slot = pick(rng);
      const auto it = std::upper_bound(span.ends.begin(), span.ends.end(), slot);
      const auto& t = span.targets[static_cast<std::size_t>(it - span.ends.begin())];
      const std::uint64_t first = it == span.ends.begin() ? 0 : *(it - 1);
      const std::uint64_t offset = (slot - first) * kAlign;
      const long long r = read_at(t.fd.get(), buf.data(), request, offset);
      if (r < 0) {
        const std::lock_guard lock(error_mutex);
        if (!failed.exchange(true))
          error = t.path.string() + ": read failed at offset " + std::to_string(offset) + ": " +
                  std::strerror(static_cast<int>(-r));
        return;
      }
      if (span.drop_after_read)
        (void)::posix_fadvise(t.fd.get(), static_cast<off_t>(offset), static_cast<off_t>(request), POSIX_FADV_DONTNEED);
      bytes.fetch_add(static_cast<std::uint64_t>(r), std::memory_order_relaxed);
      requests.fetch_add(1, std::memory_order_relaxed);
    }
  };
  {
    std::vector<std::jthread> threads;
    for (unsigned i = 0; i < depth; ++i) threads.emplace_back(worker, i);
  }
  if (failed) throw RuntimeError(error);
  DiskPass pass;
  pass.depth = depth;
  pass.requests = requests;
  pass.bytes = bytes;
  pass.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return pass;
}

}  // namespace

double DiskBench::best_bytes_per_second() const {
  double best = 0;
  for (const auto& p : passes) best = std::max(best, p.bytes_per_second());
  return best;
}

std::string filesystem_name(const fs::path& path) {
  struct statfs s {};
  if (::statfs(path.c_str(), &s) != 0) return "unknown";
  switch (static_cast<unsigned long>(s.f_type)) {
    case 0xEF53: return "ext2/3/4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x01021994: return "tmpfs";
    case 0x858458F6: return "ramfs";
    case 0x6969: return "nfs";
    case 0x794C7630: return "overlayfs";
    case 0x2FC12FC1: return "zfs";
    case 0xF2F52010: return "f2fs";
    case 0x65735546: return "fuse";
    case 0xFF534D42: return "cifs";
    case 0xFE534D42: return "smb2";
    case 0x01021997: return "9p";
    case 0x73717368: return "squashfs";
    case 0x4D44: return "vfat";
    case 0x5346544E: return "ntfs";
    default: break;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%lx", static_cast<unsigned long>(s.f_type));
  return buf;
}

std::vector<DiskBench> bench_disk(const DiskBenchOptions& o, const std::vector<std::uint64_t>& request_sizes) {
  const std::vector<unsigned> depths = o.depths.empty() ? std::vector<unsigned>{1} : o.depths;
  const double each = o.seconds / static_cast<double>(std::max<std::size_t>(1, request_sizes.size())) /
                      static_cast<double>(depths.size());
  std::uint64_t largest = 0;
  for (const auto r : request_sizes) largest = std::max(largest, align_up(std::max<std::uint64_t>(r, 1)));
  // The temporary file, written once (sized for the largest request) for every size the
  // given files cannot serve; each span reads it through its own descriptor.
  OwnedFd scratch;
  std::uint64_t scratch_bytes = o.scratch_bytes;
  bool scratch_direct = false;
  std::vector<DiskBench> out;
  for (const auto requested : request_sizes) {
    DiskBench b;
    b.request_bytes = align_up(std::max<std::uint64_t>(requested, 1));
    std::optional<Span> span;
    if (!o.files.empty()) {
      b.folder = o.files.front().parent_path();
      span = open_direct(o.files, b.request_bytes, b.note, b.direct_refused);
      if (span) b.o_direct = true;
    }
    if (!span) {
      b.folder = o.scratch_folder;
      if (!scratch) {
        scratch = scratch_file(o.scratch_folder, scratch_bytes, largest);
        OwnedFd probe(::dup(scratch.get()));
        if (!probe)
          throw RuntimeError(o.scratch_folder.string() +
                             ": dup of the temporary test file failed: " + std::strerror(errno));
        span = scratch_span(std::move(probe), o.scratch_folder, scratch_bytes, b.request_bytes, scratch_direct);
      } else {
        Span s;
        OwnedFd fd(::dup(scratch.get()));
        if (!fd)
          throw RuntimeError(o.scratch_folder.string() +
                             ": dup of the temporary test file failed: " + std::strerror(errno));
        s.drop_after_read = !scratch_direct;
        add_target(s, std::move(fd), o.scratch_folder / "(temporary file)", file_slots(scratch_bytes, b.request_bytes));
        span = std::move(s);
      }
      b.o_direct = scratch_direct;
      b.temporary_file = true;
      const std::string how = b.o_direct ? "read with O_DIRECT"
                                         : "read buffered, each range dropped from the page cache after it is read "
                                           "(this file system refuses O_DIRECT)";
      b.note = (b.note.empty() ? "" : b.note + ": ") + "measured on a temporary file of " +
               format_bytes(scratch_bytes) + " in " + o.scratch_folder.string() + ", " + how;
    }
    b.filesystem = filesystem_name(b.folder);
    b.span_bytes = span->slots() * kAlign;
    for (const unsigned d : depths) b.passes.push_back(run_pass(*span, b.request_bytes, std::max(1u, d), each));
    out.push_back(std::move(b));
  }
  return out;
}

DiskBench bench_disk(const DiskBenchOptions& o) { return bench_disk(o, {o.request_bytes}).front(); }

}  // namespace k3::machine
