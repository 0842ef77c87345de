// Where a byte string stops being whole UTF-8 characters (util/utf8.hpp).
#include "util/utf8.hpp"

namespace k3::util {

std::size_t whole_utf8_prefix(std::string_view bytes) noexcept {
  const std::size_t n = bytes.size();
  // An unfinished character is its lead and at most two continuation bytes (10xxxxxx), so
  // the lead, if any, is among the last 3 bytes; three continuations in a row end either a
  // whole 4-byte character or bytes that are not UTF-8, and neither is held.
  for (std::size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto b = static_cast<unsigned char>(bytes[n - back]);
    if ((b & 0xC0) == 0x80) continue;
    std::size_t need = 0;
    if ((b & 0xE0) == 0xC0)
      need = 2;
    else if ((b & 0xF0) == 0xE0)
      need = 3;
    else if ((b & 0xF8) == 0xF0)
      need = 4;
    else
      return n;  // ASCII or a byte that cannot lead a sequence
    return back < need ? n - back : n;
  }
  return n;
}

}  // namespace k3::util
