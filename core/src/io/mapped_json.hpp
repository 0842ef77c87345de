// A read-only view of a JSON region of a file, mapped (not copied) with the zero padding
// simdjson needs after it. The file region is mapped with MAP_POPULATE over an anonymous
// reservation that extends past it, so the padding is readable zeros even at the end of the
// file. Why not read(): the full K3 has ~125 MB of shard headers and index JSON, and on
// virtual machines a page fault per 4 KiB of fresh buffer costs more than the parse.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <simdjson.h>

namespace k3::detail {

class MappedJson {
 public:
  /// Maps bytes [offset, offset + length) of the open file `fd`; offset < 4096 (a page).
  /// Throws RuntimeError naming `file` on failure.
  MappedJson(int fd, std::uint64_t offset, std::uint64_t length, const std::string& file);
  ~MappedJson();
  MappedJson(const MappedJson&) = delete;
  MappedJson& operator=(const MappedJson&) = delete;

  [[nodiscard]] simdjson::padded_string_view view() const noexcept {
    return simdjson::padded_string_view(base_ + offset_, length_, length_ + simdjson::SIMDJSON_PADDING);
  }

 private:
  char* base_ = nullptr;
  std::size_t mapped_ = 0;
  std::size_t offset_ = 0;
  std::size_t length_ = 0;
};

}  // namespace k3::detail
