// Splitting a read request into segments an aligned reader (O_DIRECT) can issue.
//
// A segment is one aligned window of the file [file_offset, file_offset + length). It is
// read either straight into the request's destination (zero-copy: offset, destination and
// length all aligned) or into a bounce buffer from which bytes
// [copy_from, copy_from + copy_length) of the window are copied to `dest`. Windows are at
// most `max_chunk` bytes so bounce buffers stay small. With alignment 1 every segment is
// zero-copy. A window may reach past the end of the file (the kernel then returns fewer
// bytes); a segment only needs `needed()` bytes of it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

namespace k3::storage::local {

struct Segment {
  std::size_t request = 0;        ///< index of the request in the batch
  std::uint64_t file_offset = 0;  ///< aligned start of the window
  std::uint64_t length = 0;       ///< aligned window length
  bool bounce = false;            ///< read into a bounce buffer, then copy
  std::uint64_t copy_from = 0;    ///< bounce: first byte of the window the request wants
  std::uint64_t copy_length = 0;  ///< bounce: bytes to copy (zero-copy: == length)
  std::byte* dest = nullptr;      ///< where the wanted bytes go

  /// Bytes of the window that must be read for the segment to be complete.
  [[nodiscard]] std::uint64_t needed() const noexcept { return bounce ? copy_from + copy_length : length; }
};

inline std::uint64_t align_down(std::uint64_t v, std::uint64_t a) noexcept { return v - v % a; }
inline std::uint64_t align_up(std::uint64_t v, std::uint64_t a) noexcept { return align_down(v + a - 1, a); }

/// Appends the segments of one request (length > 0). `alignment` and `max_chunk` are
/// powers of two with max_chunk >= alignment.
inline void plan_segments(std::size_t request, std::uint64_t offset, std::uint64_t length, std::byte* dest,
                          std::uint64_t alignment, std::uint64_t max_chunk, std::vector<Segment>& out) {
  const bool aligned_start = offset % alignment == 0 && reinterpret_cast<std::uintptr_t>(dest) % alignment == 0;
  std::uint64_t done = 0;
  if (aligned_start) {
    const std::uint64_t body = align_down(length, alignment);
    for (; done < body;) {
      const std::uint64_t n = body - done < max_chunk ? body - done : max_chunk;
      out.push_back({request, offset + done, n, false, 0, n, dest + done});
      done += n;
    }
    if (done == length) return;
  }
  // Bounce what is left: windows over [offset + done, offset + length).
  const std::uint64_t begin = offset + done;
  const std::uint64_t end = offset + length;
  for (std::uint64_t window = align_down(begin, alignment); window < end; window += max_chunk) {
    const std::uint64_t window_end = window + max_chunk;
    const std::uint64_t want_begin = begin > window ? begin : window;
    const std::uint64_t want_end = end < window_end ? end : window_end;
    const std::uint64_t read_end = align_up(want_end, alignment);
    out.push_back({request, window, read_end - window, true, want_begin - window, want_end - want_begin,
                   dest + (want_begin - offset)});
  }
}

/// Memory aligned to `alignment` (for O_DIRECT bounce buffers and tests).
struct FreeDeleter {
  void operator()(std::byte* p) const noexcept { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<std::byte[], FreeDeleter>;

inline AlignedBuffer aligned_buffer(std::uint64_t bytes, std::uint64_t alignment) {
  const std::uint64_t rounded = align_up(bytes == 0 ? alignment : bytes, alignment);
  void* p = std::aligned_alloc(static_cast<std::size_t>(alignment), static_cast<std::size_t>(rounded));
  if (p == nullptr) throw std::bad_alloc();
  return AlignedBuffer(static_cast<std::byte*>(p));
}

}  // namespace k3::storage::local
