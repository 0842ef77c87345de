// The checks of pack_trunk_check.hpp and their messages.
#include "io/pack_trunk_check.hpp"

#include <cstdio>

#include <k3/error.hpp>

#include "io/xxh3.hpp"

namespace k3::io::trunk_check {
namespace {

std::string hex(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

std::uint64_t digest(const void* data, std::uint64_t n) noexcept {
  return XXH3_64bits(data, static_cast<std::size_t>(n));
}

void TensorCheck::whole(const std::byte* data, std::uint64_t n) const { digest_is(digest(data, n), n); }

void TensorCheck::digest_is(std::uint64_t h, std::uint64_t n) const {
  if (h == xxh3) return;
  throw RuntimeError(file + ": run '" + run + "', tensor '" + tensor + "': the " + std::to_string(n) + " bytes" +
                     (coded ? " decoded from the stream" : "") + " at offset " + std::to_string(offset) +
                     " have xxh3 " + hex(h) + ", trunk.json says " + hex(xxh3) +
                     ": the packed trunk is damaged (repack it with k3host pack-trunk)");
}

void TensorCheck::rows_at(const std::byte* data, std::uint64_t first, std::uint64_t count) const {
  if (rows.empty() || row_bytes == 0)
    throw RuntimeError(file + ": run '" + run + "', tensor '" + tensor +
                       "': read in rows, but trunk.json has no row checksums for it (a damaged trunk.json?); "
                       "repack it with k3host pack-trunk");
  if (first > rows.size() || count > rows.size() - first)
    throw RuntimeError(file + ": tensor '" + tensor + "': rows " + std::to_string(first) + "+" + std::to_string(count) +
                       " lie outside its " + std::to_string(rows.size()) + " row checksums");
  for (std::uint64_t r = 0; r < count; ++r) {
    const std::uint64_t h = digest(data + r * row_bytes, row_bytes);
    if (h == rows[first + r]) continue;
    throw RuntimeError(file + ": run '" + run + "', tensor '" + tensor + "', row " + std::to_string(first + r) +
                       ": the " + std::to_string(row_bytes) + " bytes at offset " +
                       std::to_string(offset + (first + r) * row_bytes) + " have xxh3 " + hex(h) +
                       ", trunk.json says " + hex(rows[first + r]) +
                       ": the packed trunk is damaged (repack it with k3host pack-trunk)");
  }
}

}  // namespace k3::io::trunk_check
