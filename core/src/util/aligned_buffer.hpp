// An owned, aligned, uninitialised byte buffer (RAII over std::aligned_alloc).
#pragma once
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

namespace k3 {

class AlignedBuffer {
 public:
  static constexpr std::size_t kAlign = 4096;  // O_DIRECT-friendly and page aligned

  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t bytes) : size_(bytes) {
    if (bytes == 0) return;
    const std::size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    data_.reset(static_cast<std::byte*>(std::aligned_alloc(kAlign, rounded)));
    if (!data_) throw std::bad_alloc();
  }

  [[nodiscard]] std::byte* data() noexcept { return data_.get(); }
  [[nodiscard]] const std::byte* data() const noexcept { return data_.get(); }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  struct Free {
    void operator()(std::byte* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> data_;
  std::size_t size_ = 0;
};

}  // namespace k3
