// The http storage plugin's response handling (plugins/storage/http): the header lines
// libcurl hands its header callback (ResponseHeaders::feed, redirects and 100 Continue
// included), the Content-Range it then parses, and the range plan and scatter that put a
// 206 body's bytes into the read requests.
//
// Input: header lines up to the first NUL; after it, read requests as 8 bytes each (u32
// offset, u16 length, u8 gap in 64-byte steps, u8 max range: 4096 + 256 per step; the last
// request's gap and max range apply) over a 64 KiB file. Oracles: a parsed
// Content-Range is an ordered interval that prints back to itself; the plan covers every
// request with ranges no longer than the maximum, and scattering each range's bytes of the
// file fills every request with exactly the file's bytes.
#include <cstring>

#include "fuzz_support.hpp"
#include "http/http_response.hpp"
#include "http/range_plan.hpp"

namespace http = k3::storage::http;

namespace {

void check_content_range(std::string_view v) {
  const auto cr = http::parse_content_range(v);
  if (!cr) return;
  const std::string total = cr->total ? std::to_string(*cr->total) : "*";
  if (cr->unsatisfied) {
    k3::fuzz::check(cr->total.has_value(), "bytes */N without N");
    return;
  }
  k3::fuzz::check(cr->first <= cr->last, "a Content-Range that runs backwards");
  // Printed without leading zeros, the same interval must parse back.
  const auto again =
      http::parse_content_range("bytes " + std::to_string(cr->first) + "-" + std::to_string(cr->last) + "/" + total);
  k3::fuzz::check(again && again->first == cr->first && again->last == cr->last && again->total == cr->total,
                  "a Content-Range that does not print back to itself");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto parts = k3::fuzz::split(k3::fuzz::as_text(data, size), std::string_view("\0", 1), 2);
  http::ResponseHeaders headers;
  for (const auto line : k3::fuzz::split(parts[0], "\n", 64)) {
    headers.feed(line);
    check_content_range(line);
  }
  if (headers.content_range) check_content_range(*headers.content_range);
  if (parts.size() < 2) return 0;

  // The read batch: as HttpFile::read cuts it into pieces and plans ranges over them.
  constexpr std::uint64_t kFile = 64 * 1024;
  std::vector<std::uint8_t> file(kFile);
  for (std::size_t i = 0; i < file.size(); ++i) file[i] = static_cast<std::uint8_t>(i * 131 + 7);
  const std::string_view reqs = parts[1];
  std::vector<std::vector<std::byte>> dests;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> asked;
  std::vector<http::Piece> pieces;
  std::uint64_t gap = 0, max_range = 1;
  for (std::size_t at = 0; at + 8 <= reqs.size() && dests.size() < 64; at += 8) {
    std::uint32_t off;
    std::uint16_t len;
    std::memcpy(&off, reqs.data() + at, 4);
    std::memcpy(&len, reqs.data() + at + 4, 2);
    gap = static_cast<std::uint8_t>(reqs[at + 6]) * 64u;
    // The plugin accepts max_range_bytes from 4096 and coalesce_gap_bytes up to it.
    max_range = 4096 + static_cast<std::uint8_t>(reqs[at + 7]) * 256u;
    const std::uint64_t offset = off % kFile, length = std::min<std::uint64_t>(1 + len, kFile - offset);
    dests.emplace_back(length);
    asked.emplace_back(offset, length);
  }
  for (std::size_t i = 0; i < dests.size(); ++i)
    http::cut_pieces(i, asked[i].first, asked[i].second, dests[i].data(), max_range, pieces);
  const auto ranges = http::plan_ranges(std::move(pieces), gap, max_range);
  for (const auto& r : ranges) {
    k3::fuzz::check(r.first < r.end && r.end <= kFile, "a range outside the file");
    k3::fuzz::check(r.length() <= max_range, "a range longer than max_range");
    std::size_t cursor = 0;
    // The body arrives in pieces of any size; 1000 bytes at a time here.
    for (std::uint64_t at = r.first; at < r.end; at += 1000) {
      const std::uint64_t n = std::min<std::uint64_t>(1000, r.end - at);
      http::scatter(r, cursor, at, reinterpret_cast<const std::byte*>(file.data() + at), n);
    }
  }
  for (std::size_t i = 0; i < dests.size(); ++i)
    k3::fuzz::check(std::memcmp(dests[i].data(), file.data() + asked[i].first, asked[i].second) == 0,
                    "request " + std::to_string(i) + " does not hold the file's bytes after the scatter");
  return 0;
}
