#include "nextuse_policy.hpp"

#include <new>
#include <string>

namespace k3cache {

using k3::sdk::ExpertKey;
using k3::sdk::Status;
using k3::sdk::StatusCode;

Status NextUsePolicy::reset(std::uint64_t capacity_slots) noexcept {
  if (capacity_slots == 0) return Status::error(StatusCode::invalid_argument, "nextuse: capacity must be > 0 slots");
  try {
    // Keys seen outnumber the slots; four times the capacity covers most runs before the
    // per-key table has to grow (it grows only when a key is seen for the first time).
    index_.reset(static_cast<std::size_t>(4 * capacity_slots));
    metas_.reset(static_cast<std::size_t>(4 * capacity_slots));
    recency_.clear();
    resident_.clear();
    resident_.reserve(static_cast<std::size_t>(capacity_slots));
    visits_.assign(kMaxLayers, 0);
    model_.reset(params_.per_layer ? kMaxLayers : 0);
  } catch (const std::bad_alloc&) {
    return Status::error(StatusCode::out_of_memory,
                         "nextuse: cannot allocate state for " + std::to_string(capacity_slots) + " slots");
  }
  capacity_ = capacity_slots;
  clock_ = 0;
  rng_.seed(params_.seed);
  started_ = false;
  current_layer_ = 0;
  min_layer_ = 0xFFFFFFFFu;
  max_layer_ = 0;
  return Status::success();
}

std::uint32_t NextUsePolicy::meta_of(std::uint64_t packed) {
  std::uint32_t id = index_.find(packed);
  if (id != kNil) return id;
  const ExpertKey k = ExpertKey::unpack(packed);
  Meta m;
  m.key = packed;
  m.last_visit = visits_[layer_slot(k.layer)];
  id = metas_.alloc(m);
  try {
    index_.insert(packed, id);
  } catch (...) {
    metas_.release(id);
    throw;
  }
  return id;
}

void NextUsePolicy::on_access(ExpertKey key, std::uint64_t) noexcept {
  ++clock_;
  const std::size_t slot = layer_slot(key.layer);
  if (!started_ || key.layer != current_layer_) {  // a new serving group: a visit of this layer
    started_ = true;
    current_layer_ = key.layer;
    ++visits_[slot];
    if (key.layer < min_layer_) min_layer_ = key.layer;
    if (key.layer > max_layer_) max_layer_ = key.layer;
  }
  std::uint32_t id = 0;
  try {
    id = meta_of(key.packed());
  } catch (const std::bad_alloc&) {
    return;  // the key stays unknown: scored as never seen
  }
  Meta& m = metas_[id];
  m.last_access = clock_;
  if (m.dense != kNotResident) {
    recency_.unlink(metas_, id);
    recency_.push_head(metas_, id);
  }
  const std::uint64_t now = visits_[slot];
  if (m.count > 0 && m.last_visit == now) return;  // another request of the same visit
  if (m.count > 0) {
    const std::uint64_t gap = now - m.last_visit;
    model_.end(slot, bucket_of(m), gap);
    m.previous_gap = m.last_gap;
    m.last_gap = gap;
  }
  if (m.count < 0xFFFFu) ++m.count;
  m.last_visit = now;
  model_.start(slot, bucket_of(m));
}

void NextUsePolicy::on_insert(ExpertKey key) noexcept {
  try {
    const std::uint32_t id = meta_of(key.packed());
    Meta& m = metas_[id];
    if (m.dense != kNotResident) return;         // already resident
    if (m.count == 0) m.last_access = ++clock_;  // a prefetch of a key never accessed
    resident_.push_back(id);
    m.dense = static_cast<std::uint32_t>(resident_.size() - 1);
    recency_.push_head(metas_, id);
  } catch (const std::bad_alloc&) {
    // Not tracked as resident: it cannot be chosen as a victim; the host evicts others.
  }
}

void NextUsePolicy::on_remove(ExpertKey key) noexcept {
  const std::uint32_t id = index_.find(key.packed());
  if (id == kNil || metas_[id].dense == kNotResident) return;
  const std::uint32_t pos = metas_[id].dense;
  const std::uint32_t moved = resident_.back();
  resident_[pos] = moved;
  metas_[moved].dense = pos;
  resident_.pop_back();
  metas_[id].dense = kNotResident;
  recency_.unlink(metas_, id);
}

double NextUsePolicy::score_meta(const Meta& m) const noexcept {
  const ExpertKey k = ExpertKey::unpack(m.key);
  const std::size_t slot = layer_slot(k.layer);
  // Groups until layer k.layer is served again: the layers between the current one and
  // it, cyclically; a key of the current layer waits for the next token.
  const double period = max_layer_ >= min_layer_ ? static_cast<double>(max_layer_ - min_layer_ + 1) : 1.0;
  double first = period;
  if (params_.layer_order && k.layer != current_layer_) {
    const double d = static_cast<double>(k.layer) - static_cast<double>(current_layer_);
    first = d > 0 ? d : d + period;
    if (first > period || first < 1) first = period;  // a layer outside the range seen so far
  }
  const std::uint64_t now = visits_[slot];
  // Visits of its layer the key has missed since its last access. The current layer's
  // visit counts as missed: choose_victim runs after all of the group's accesses.
  const std::uint64_t age = now - m.last_visit;
  return model_.inverse_time(slot, bucket_of(m), age, first, period);
}

std::uint8_t NextUsePolicy::bucket_of(const Meta& m) const noexcept {
  return ReuseModel::bucket(m.last_gap, m.previous_gap, m.count);
}

std::uint64_t NextUsePolicy::next_random() noexcept { return rng_.next(); }

Status NextUsePolicy::choose_victim(ExpertKey, const k3::sdk::VictimQuery& query, ExpertKey& victim) noexcept {
  const std::size_t n = resident_.size();
  if (n == 0) return Status::error(StatusCode::not_found, "nextuse: no resident key to evict");
  const bool scan_all = n <= params_.sample;
  const std::size_t draws = scan_all ? n : params_.sample;
  std::uint32_t best = kNotResident;
  double best_score = 0;
  auto consider = [&](std::uint32_t id) {
    const Meta& m = metas_[id];
    if (!query.evictable(ExpertKey::unpack(m.key))) return;
    const double s = score_meta(m);
    if (best != kNotResident) {
      const Meta& b = metas_[best];
      if (s > best_score) return;
      if (s == best_score && (m.last_access > b.last_access || (m.last_access == b.last_access && m.key > b.key)))
        return;
    }
    best = id;
    best_score = s;
  };
  for (std::size_t i = 0; i < draws; ++i)
    consider(resident_[scan_all ? i : static_cast<std::size_t>(next_random() % n)]);
  if (!scan_all) {  // the least recently accessed keys are the likeliest dead ones
    std::uint32_t taken = 0;
    for (std::uint32_t id = recency_.tail(); id != kNil && taken < params_.oldest; id = metas_[id].prev) {
      if (!query.evictable(ExpertKey::unpack(metas_[id].key))) continue;
      consider(id);
      ++taken;
    }
  }
  if (best == kNotResident && !scan_all)  // every sampled key was leased: look at all of them
    for (const std::uint32_t id : resident_) consider(id);
  if (best == kNotResident)
    return Status::error(StatusCode::not_found, "nextuse: every resident key is leased or pinned");
  victim = ExpertKey::unpack(metas_[best].key);
  return Status::success();
}

Status NextUsePolicy::set_future(std::span<const ExpertKey>) noexcept {
  return Status::error(StatusCode::unsupported, "nextuse does not use the future request stream");
}

}  // namespace k3cache
