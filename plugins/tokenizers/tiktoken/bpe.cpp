#include "bpe.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>

#include "tokenizer_error.hpp"

namespace k3::tiktoken {

namespace {

constexpr std::uint32_t kNone = 0xFFFFFFFFu;

[[noreturn]] void missing_byte(std::string_view piece, std::size_t at) {
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned>(static_cast<unsigned char>(piece[at])));
  fail(sdk::StatusCode::invalid_argument,
       std::string("byte ") + hex + " has no rank in the rank file (it must list all 256 single bytes)");
}

// Emits the id of every part [starts[i], starts[i+1]).
void emit_parts(const RankTable& ranks, std::string_view piece, const std::vector<std::uint32_t>& starts,
                std::vector<std::uint32_t>& out) {
  for (std::size_t i = 0; i + 1 < starts.size(); ++i) {
    const Rank r = ranks.rank_of(piece.substr(starts[i], starts[i + 1] - starts[i]));
    if (r == kNoRank) missing_byte(piece, starts[i]);  // only single bytes can lack a rank
    out.push_back(r);
  }
}

// tiktoken's _byte_pair_merge: parts vector, full scan for the minimum after each merge.
void merge_by_scan(const RankTable& ranks, std::string_view piece, BpeScratch& s) {
  const std::size_t n = piece.size();
  auto& starts = s.starts;
  auto& pair_rank = s.ranks;
  starts.clear();
  pair_rank.clear();
  for (std::size_t i = 0; i <= n; ++i) starts.push_back(static_cast<std::uint32_t>(i));
  // pair_rank[i]: rank of parts i and i+1 joined; kNoRank when there is no part i+1.
  for (std::size_t i = 0; i + 1 < n; ++i) pair_rank.push_back(ranks.rank_of(piece.substr(i, 2)));
  pair_rank.push_back(kNoRank);
  auto joined_rank = [&](std::size_t i) -> Rank {  // parts i and i+1 after the current merge
    if (i + 2 >= starts.size()) return kNoRank;
    return ranks.rank_of(piece.substr(starts[i], starts[i + 2] - starts[i]));
  };
  for (;;) {
    Rank best = kNoRank;
    std::size_t at = 0;
    for (std::size_t i = 0; i < pair_rank.size(); ++i)
      if (pair_rank[i] < best) best = pair_rank[i], at = i;
    if (best == kNoRank) break;
    starts.erase(starts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    pair_rank.erase(pair_rank.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    pair_rank[at] = joined_rank(at);
    if (at > 0) pair_rank[at - 1] = joined_rank(at - 1);
  }
}

// The same merges in O(n log n): parts form a linked list over byte offsets; the heap holds
// (rank, start) of candidate pairs and stale entries are skipped when popped.
void merge_by_heap(const RankTable& ranks, std::string_view piece, BpeScratch& s) {
  const auto n = static_cast<std::uint32_t>(piece.size());
  auto& next = s.next;
  auto& prev = s.prev;
  auto& pair_rank = s.ranks;  // indexed by part start
  auto& heap = s.heap;
  next.resize(n);
  prev.resize(n);
  pair_rank.assign(n, kNoRank);
  heap.clear();
  for (std::uint32_t i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? i + 1 : kNone;
    prev[i] = i > 0 ? i - 1 : kNone;
  }
  auto end_of = [&](std::uint32_t part) { return next[part] == kNone ? n : next[part]; };
  auto key = [](Rank r, std::uint32_t start) { return (std::uint64_t{r} << 32) | start; };
  const std::greater<std::uint64_t> min_first;
  auto refresh = [&](std::uint32_t part) {  // recompute the pair (part, next part)
    const std::uint32_t second = next[part];
    Rank r = kNoRank;
    if (second != kNone) r = ranks.rank_of(piece.substr(part, end_of(second) - part));
    pair_rank[part] = r;
    if (r != kNoRank) {
      heap.push_back(key(r, part));
      std::push_heap(heap.begin(), heap.end(), min_first);
    }
  };
  for (std::uint32_t i = 0; i + 1 < n; ++i) refresh(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), min_first);
    const std::uint64_t top = heap.back();
    heap.pop_back();
    const auto part = static_cast<std::uint32_t>(top & 0xFFFFFFFFu);
    const auto r = static_cast<Rank>(top >> 32);
    // Stale: the part was merged away (its rank reset) or its pair changed since the push.
    if (pair_rank[part] != r) continue;
    const std::uint32_t gone = next[part];
    next[part] = next[gone];
    if (next[gone] != kNone) prev[next[gone]] = part;
    pair_rank[gone] = kNoRank;
    refresh(part);
    if (prev[part] != kNone) refresh(prev[part]);
  }
  s.starts.clear();
  for (std::uint32_t p = 0; p != kNone; p = next[p]) s.starts.push_back(p);
  s.starts.push_back(n);
}

}  // namespace

void byte_pair_encode(const RankTable& ranks, std::string_view piece, BpeScratch& scratch,
                      std::vector<std::uint32_t>& out) {
  if (const Rank whole = ranks.rank_of(piece); whole != kNoRank) {
    out.push_back(whole);
    return;
  }
  if (piece.size() == 1) missing_byte(piece, 0);
  if (piece.size() < kHeapBpeMinBytes)
    merge_by_scan(ranks, piece, scratch);
  else
    merge_by_heap(ranks, piece, scratch);
  emit_parts(ranks, piece, scratch.starts, out);
}

}  // namespace k3::tiktoken
