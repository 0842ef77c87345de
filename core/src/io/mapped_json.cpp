#include "io/mapped_json.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <k3/error.hpp>

namespace k3::detail {

MappedJson::MappedJson(int fd, std::uint64_t offset, std::uint64_t length, const std::string& file)
    : offset_(static_cast<std::size_t>(offset)), length_(static_cast<std::size_t>(length)) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t file_part = offset_ + length_;
  mapped_ = (file_part + simdjson::SIMDJSON_PADDING + page - 1) / page * page;
  void* reserve = ::mmap(nullptr, mapped_, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (reserve == MAP_FAILED) throw RuntimeError(file + ": cannot reserve memory: " + std::strerror(errno));
  base_ = static_cast<char*>(reserve);
  if (file_part > 0 && ::mmap(base_, file_part, PROT_READ, MAP_PRIVATE | MAP_FIXED | MAP_POPULATE, fd, 0) == MAP_FAILED) {
    const int err = errno;
    ::munmap(base_, mapped_);
    base_ = nullptr;
    throw RuntimeError(file + ": cannot map: " + std::strerror(err));
  }
}

MappedJson::~MappedJson() {
  if (base_) ::munmap(base_, mapped_);
}

}  // namespace k3::detail
