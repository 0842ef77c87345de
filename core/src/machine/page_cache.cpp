// page_cache_state(): how much of a set of files the page cache holds, by mincore() over a
// read-only shared mapping of each (fincore's method). Mapping reads nothing and faults
// nothing in; the mapping is dropped before the next file.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include <k3/machine.hpp>

#include "util/owned_fd.hpp"

namespace k3::machine {

namespace {

constexpr std::uint64_t kWindow = 1ull << 30;  // map at most 1 GiB at a time (32-bit safe vectors)

/// Resident bytes of `fd` (size bytes); nullopt when it cannot be mapped.
std::optional<std::uint64_t> resident_bytes(int fd, std::uint64_t size) {
  const auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  std::uint64_t resident = 0;
  std::vector<unsigned char> vec;
  for (std::uint64_t at = 0; at < size; at += kWindow) {
    const std::uint64_t len = std::min(kWindow, size - at);
    void* p = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(at));
    if (p == MAP_FAILED) return std::nullopt;
    vec.assign((len + page - 1) / page, 0);
    const int rc = mincore(p, len, vec.data());
    munmap(p, len);
    if (rc != 0) return std::nullopt;
    for (std::size_t i = 0; i < vec.size(); ++i)
      if (vec[i] & 1) resident += std::min(page, len - i * page);
  }
  return resident;
}

}  // namespace

PageCacheState page_cache_state(const std::vector<std::filesystem::path>& files) {
  PageCacheState s;
  for (const auto& file : files) {
    ++s.files;
    const OwnedFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (!fd || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      ++s.unreadable;
      continue;
    }
    const auto size = static_cast<std::uint64_t>(st.st_size);
    s.bytes += size;
    if (size == 0) continue;
    if (const auto r = resident_bytes(fd.get(), size))
      s.resident += *r;
    else
      ++s.unreadable;
  }
  return s;
}

}  // namespace k3::machine
