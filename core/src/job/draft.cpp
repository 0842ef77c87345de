// Draft sources for speculative decoding (k3/draft.hpp). Text that repeats itself (code,
// lists, quotes, a model that loops) is predicted by what followed its last occurrence in
// the context; text like a corpus the user supplies, by that corpus's most frequent
// continuation. A wrong draft costs compute (and expert reads) for its position, never a
// different output.
#include <k3/draft.hpp>

#include <algorithm>
#include <map>

namespace k3 {

std::vector<std::uint32_t> lookup_drafts(std::span<const std::uint32_t> context, std::size_t longest,
                                         std::size_t shortest, std::size_t max_draft) {
  const std::size_t len = context.size();
  shortest = std::max<std::size_t>(1, shortest);
  if (max_draft == 0 || len < 2 || longest < shortest) return {};
  for (std::size_t n = std::min(longest, len - 1); n >= shortest; --n) {
    const auto suffix = context.subspan(len - n);
    // Latest earlier occurrence first: recent text predicts best. `start` is where the
    // occurrence begins; it must end before the suffix itself does.
    for (std::size_t start = len - n; start-- > 0;) {
      if (!std::equal(suffix.begin(), suffix.end(), context.begin() + static_cast<std::ptrdiff_t>(start))) continue;
      const std::size_t from = start + n;
      const std::size_t count = std::min(max_draft, len - from);
      return {context.begin() + static_cast<std::ptrdiff_t>(from),
              context.begin() + static_cast<std::ptrdiff_t>(from + count)};
    }
    if (n == shortest) break;
  }
  return {};
}

std::size_t DraftBudget::next() {
  std::size_t k = 0;
  for (double kept = p_; k < max_ && kept > kDraftCost; kept *= p_) ++k;
  if (k == 0 && max_ > 0 && ++idle_ >= kProbeEvery) k = 1;
  if (k > 0) idle_ = 0;
  return k;
}

void DraftBudget::checked(std::size_t proposed, std::size_t kept) {
  for (std::size_t i = 0; i < kept; ++i) p_ += kRate * (1.0 - p_);
  if (kept < proposed) p_ -= kRate * p_;
}

namespace {

/// Compares the corpus at `a` with `key` on the first key.size() ids; a suffix that ends
/// first orders before.
int compare_prefix(std::span<const std::uint32_t> ids, std::size_t a, std::span<const std::uint32_t> key) {
  for (std::size_t i = 0; i < key.size(); ++i) {
    if (a + i >= ids.size()) return -1;
    if (ids[a + i] != key[i]) return ids[a + i] < key[i] ? -1 : 1;
  }
  return 0;
}

}  // namespace

DraftStore::DraftStore(std::vector<std::uint32_t> ids) : ids_(std::move(ids)), suffixes_(ids_.size()) {
  for (std::size_t i = 0; i < suffixes_.size(); ++i) suffixes_[i] = static_cast<std::uint32_t>(i);
  const std::span<const std::uint32_t> all(ids_);
  std::sort(suffixes_.begin(), suffixes_.end(), [&](std::uint32_t a, std::uint32_t b) {
    const std::size_t n = std::min<std::size_t>(kOrder + 1, all.size() - std::max(a, b));
    for (std::size_t i = 0; i < n; ++i)
      if (all[a + i] != all[b + i]) return all[a + i] < all[b + i];
    // Equal over the shorter length: the one that ends first orders first, then position.
    const std::size_t la = std::min<std::size_t>(kOrder + 1, all.size() - a);
    const std::size_t lb = std::min<std::size_t>(kOrder + 1, all.size() - b);
    return la != lb ? la < lb : a < b;
  });
}

DraftStore::Prediction DraftStore::predict(std::span<const std::uint32_t> suffix, std::uint32_t& next) const {
  const std::span<const std::uint32_t> all(ids_);
  const auto lo = std::partition_point(suffixes_.begin(), suffixes_.end(),
                                       [&](std::uint32_t p) { return compare_prefix(all, p, suffix) < 0; });
  const auto hi =
      std::partition_point(lo, suffixes_.end(), [&](std::uint32_t p) { return compare_prefix(all, p, suffix) == 0; });
  if (lo == hi) return Prediction::absent;
  std::map<std::uint32_t, std::size_t> counts;  // ordered: ties go to the lower id
  std::size_t seen = 0;
  for (auto it = lo; it != hi && seen < kMaxScan; ++it) {
    const std::size_t at = *it + suffix.size();
    if (at >= all.size()) continue;
    ++counts[all[at]];
    ++seen;
  }
  std::size_t best = 0;
  for (const auto& [id, n] : counts)
    if (n > best) {
      best = n;
      next = id;
    }
  return best >= kMinCount && static_cast<double>(best) >= kMinShare * static_cast<double>(seen) ? Prediction::confident
                                                                                                 : Prediction::unsure;
}

std::vector<std::uint32_t> DraftStore::draft(std::span<const std::uint32_t> context, std::size_t max_draft) const {
  std::vector<std::uint32_t> tail(context.end() - static_cast<std::ptrdiff_t>(std::min(context.size(), kOrder)),
                                  context.end());
  std::vector<std::uint32_t> out;
  while (out.size() < max_draft) {
    bool found = false;
    std::uint32_t next = 0;
    // The longest suffix the corpus holds decides; a confident shorter one does not
    // overrule an unsure longer one.
    for (std::size_t n = std::min(kOrder, tail.size()); n >= 2; --n) {
      const Prediction p = predict({tail.data() + tail.size() - n, n}, next);
      if (p == Prediction::absent) continue;
      found = p == Prediction::confident;
      break;
    }
    if (!found) break;
    out.push_back(next);
    tail.push_back(next);
    if (tail.size() > kOrder) tail.erase(tail.begin());
  }
  return out;
}

}  // namespace k3
