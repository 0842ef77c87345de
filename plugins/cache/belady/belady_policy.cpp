#include "belady_policy.hpp"

#include <new>
#include <utility>

namespace k3cache {

using k3::sdk::ExpertKey;
using k3::sdk::Status;
using k3::sdk::StatusCode;

namespace {
std::string describe(ExpertKey k) {
  return "(layer " + std::to_string(k.layer) + ", expert " + std::to_string(k.expert) + ")";
}
}  // namespace

Status BeladyPolicy::reset(std::uint64_t capacity_slots) noexcept {
  if (capacity_slots == 0) return Status::error(StatusCode::invalid_argument, "belady: capacity must be > 0 slots");
  keys_.clear();
  order_.clear();
  next_after_.clear();
  future_ = {};
  expected_seq_ = 0;
  have_future_ = false;
  error_.clear();
  return Status::success();
}

Status BeladyPolicy::set_future(std::span<const ExpertKey> requests) noexcept {
  try {
    future_ = requests;
    next_after_.assign(requests.size(), kNever);
    keys_.clear();
    order_.clear();
    // Backward pass: keys_[k].next_use ends as the first request of k (the state before seq 0).
    for (std::size_t i = requests.size(); i-- > 0;) {
      KeyState& s = keys_[requests[i].packed()];
      next_after_[i] = s.next_use;
      s.next_use = i;
    }
  } catch (const std::bad_alloc&) {
    return Status::error(StatusCode::out_of_memory,
                         "belady: cannot index a future of " + std::to_string(requests.size()) + " requests");
  }
  expected_seq_ = 0;
  have_future_ = true;
  error_.clear();
  return Status::success();
}

void BeladyPolicy::diverge(std::string why) noexcept {
  if (error_.empty()) error_ = std::move(why);
}

void BeladyPolicy::on_access(ExpertKey key, std::uint64_t seq) noexcept {
  if (!error_.empty()) return;
  try {
    if (!have_future_)
      return diverge("belady: a request arrived before set_future(): this policy needs the future request stream");
    if (seq != expected_seq_)
      return diverge("belady: request seq " + std::to_string(seq) + " arrived when seq " +
                     std::to_string(expected_seq_) + " was expected");
    if (seq >= future_.size())
      return diverge("belady: request seq " + std::to_string(seq) + " is past the end of the future (" +
                     std::to_string(future_.size()) + " requests)");
    if (!(future_[seq] == key))
      return diverge("belady: request seq " + std::to_string(seq) + " is " + describe(key) + " but the future says " +
                     describe(future_[seq]) + ": the run diverged from the recorded trace");
    ++expected_seq_;
    KeyState& s = keys_[key.packed()];  // present: every future key was indexed
    if (s.resident) order_.erase(Rank{s.next_use, key.packed()});
    s.next_use = next_after_[seq];
    if (s.resident) order_.insert(Rank{s.next_use, key.packed()});
  } catch (const std::bad_alloc&) {
    diverge("belady: out of memory while tracking request " + std::to_string(seq));
  }
}

void BeladyPolicy::on_insert(ExpertKey key) noexcept {
  if (!error_.empty()) return;
  try {
    // A key absent from the future (possible only for a prefetch) is never used: kNever.
    KeyState& s = keys_[key.packed()];
    if (s.resident) return;
    s.resident = true;
    order_.insert(Rank{s.next_use, key.packed()});
  } catch (const std::bad_alloc&) {
    diverge("belady: out of memory while inserting " + describe(key));
  }
}

void BeladyPolicy::on_remove(ExpertKey key) noexcept {
  const auto it = keys_.find(key.packed());
  if (it == keys_.end() || !it->second.resident) return;
  order_.erase(Rank{it->second.next_use, key.packed()});
  it->second.resident = false;
}

Status BeladyPolicy::choose_victim(ExpertKey, const k3::sdk::VictimQuery& query, ExpertKey& victim) noexcept {
  if (!have_future_ && error_.empty())
    return Status::error(StatusCode::invalid_argument,
                         "belady: set_future() was not called: this policy needs the future request stream");
  if (!error_.empty()) return Status::error(StatusCode::invalid_argument, error_);
  for (const Rank& r : order_) {
    const ExpertKey k = ExpertKey::unpack(r.key);
    if (query.evictable(k)) {
      victim = k;
      return Status::success();
    }
  }
  return Status::error(StatusCode::not_found, order_.empty() ? "belady: no resident key to evict"
                                                             : "belady: every resident key is leased or pinned");
}

}  // namespace k3cache
