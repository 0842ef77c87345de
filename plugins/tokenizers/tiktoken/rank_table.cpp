#include "rank_table.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>

#include <xxhash.h>

#include "base64.hpp"
#include "tokenizer_error.hpp"

namespace k3::tiktoken {

using sdk::StatusCode;

namespace {

std::uint64_t hash_bytes(std::string_view b) noexcept { return XXH3_64bits(b.data(), b.size()); }

// Splits a line on runs of spaces/tabs, as Python's str.split() does for these files.
std::vector<std::string_view> fields_of(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

}  // namespace

RankTable RankTable::parse(const std::string& data, const std::string& name) {
  RankTable table;
  std::vector<Entry> entries;
  std::string token;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos < data.size()) {
    std::size_t eol = data.find('\n', pos);
    if (eol == std::string::npos) eol = data.size();
    std::string_view line(data.data() + pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const auto where = [&] { return name + ":" + std::to_string(line_no); };
    const auto fields = fields_of(line);
    if (fields.size() != 2)
      fail(StatusCode::invalid_argument,
           where() + ": expected '<base64 token> <rank>', got " + std::to_string(fields.size()) + " field(s)");
    if (!decode_base64(fields[0], token))
      fail(StatusCode::invalid_argument, where() + ": bad base64 '" + std::string(fields[0]) + "'");
    if (token.empty()) fail(StatusCode::invalid_argument, where() + ": empty token");
    std::uint64_t rank = 0;
    const auto res = std::from_chars(fields[1].data(), fields[1].data() + fields[1].size(), rank);
    if (res.ec != std::errc{} || res.ptr != fields[1].data() + fields[1].size())
      fail(StatusCode::invalid_argument, where() + ": rank '" + std::string(fields[1]) + "' is not an integer");
    if (rank > kMaxRank)
      fail(StatusCode::invalid_argument,
           where() + ": rank " + std::to_string(rank) + " is above the supported maximum " + std::to_string(kMaxRank));
    if (table.bytes_.size() + token.size() > std::numeric_limits<std::uint32_t>::max())
      fail(StatusCode::invalid_argument, where() + ": rank file too large");
    entries.push_back({{static_cast<std::uint32_t>(table.bytes_.size()), static_cast<std::uint32_t>(token.size())},
                       static_cast<Rank>(rank),
                       line_no});
    table.bytes_ += token;
  }
  table.build(entries, name);
  return table;
}

void RankTable::build(const std::vector<Entry>& entries, const std::string& origin) {
  std::size_t capacity = 16;
  while (capacity < entries.size() * 2) capacity *= 2;
  slots_.assign(capacity, Slot{});
  Rank end = 0;
  for (const auto& e : entries) end = std::max(end, e.rank + 1);
  by_rank_.assign(end, Span{});
  std::vector<std::size_t> line_of_rank(end, 0);
  const std::size_t mask = capacity - 1;
  for (const auto& e : entries) {
    const auto where = [&] { return origin + ":" + std::to_string(e.line); };
    if (by_rank_[e.rank].length != 0)
      fail(StatusCode::invalid_argument, where() + ": rank " + std::to_string(e.rank) + " already used at line " +
                                             std::to_string(line_of_rank[e.rank]));
    by_rank_[e.rank] = e.span;
    line_of_rank[e.rank] = e.line;
    const std::string_view key(bytes_.data() + e.span.offset, e.span.length);
    const std::uint64_t h = hash_bytes(key);
    std::size_t i = static_cast<std::size_t>(h) & mask;
    while (slots_[i].length != 0) {
      const Slot& s = slots_[i];
      if (s.length == key.size() && std::memcmp(bytes_.data() + s.offset, key.data(), key.size()) == 0)
        fail(StatusCode::invalid_argument, where() + ": token already has rank " + std::to_string(s.rank) + " (line " +
                                               std::to_string(line_of_rank[s.rank]) + ")");
      i = (i + 1) & mask;
    }
    slots_[i] = {e.span.offset, e.span.length, static_cast<std::uint32_t>(h), e.rank};
  }
  count_ = entries.size();
}

Rank RankTable::rank_of(std::string_view bytes) const noexcept {
  if (slots_.empty() || bytes.empty()) return kNoRank;
  const std::uint64_t h = hash_bytes(bytes);
  const auto h32 = static_cast<std::uint32_t>(h);
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = static_cast<std::size_t>(h) & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.length == 0) return kNoRank;
    if (s.hash == h32 && s.length == bytes.size() &&
        std::memcmp(bytes_.data() + s.offset, bytes.data(), bytes.size()) == 0)
      return s.rank;
  }
}

std::string_view RankTable::bytes_of(Rank rank) const noexcept {
  if (rank >= by_rank_.size()) return {};
  const Span s = by_rank_[rank];
  return {bytes_.data() + s.offset, s.length};
}

}  // namespace k3::tiktoken
