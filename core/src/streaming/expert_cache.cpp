#include "streaming/expert_cache.hpp"

#include <algorithm>
#include <map>
#include <string>

#include <k3/error.hpp>
#include <k3/geometry.hpp>

#include "model/tensor_table.hpp"
#include "streaming/serve_batch.hpp"

namespace k3::cache {

namespace {
constexpr std::uint64_t kTensorAlign = 64;
std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }
}  // namespace

/// The slot arena as serve_batch() sees it, for one request(): leases go into `lease`,
/// reads into `jobs`. What the policy may evict: resident, read, and not leased.
class ExpertCache::Arena final : public sdk::VictimQuery {
 public:
  Arena(ExpertCache& c, Lease& lease, std::vector<Job>& jobs) : c_(c), lease_(lease), jobs_(jobs) {}
  [[nodiscard]] bool evictable(sdk::ExpertKey key) const noexcept override {
    const auto it = c_.where_.find(key.packed());
    if (it == c_.where_.end()) return false;
    const Slot& s = c_.slot_[it->second];
    return s.state == State::ready && s.leases == 0;
  }
  [[nodiscard]] bool resident(sdk::ExpertKey key) const { return c_.where_.contains(key.packed()); }
  void lease(sdk::ExpertKey key) {
    const std::uint32_t s = c_.where_.at(key.packed());
    ++c_.slot_[s].leases;
    lease_.slots_.push_back(s);
  }
  bool admit_free(sdk::ExpertKey key) {
    if (c_.free_.empty()) return false;
    const std::uint32_t s = c_.free_.back();
    c_.free_.pop_back();
    load(s, key);
    return true;
  }
  void replace(sdk::ExpertKey victim, sdk::ExpertKey key) {
    const auto it = c_.where_.find(victim.packed());
    const std::uint32_t s = it->second;
    c_.where_.erase(it);
    load(s, key);
  }

 private:
  void load(std::uint32_t s, sdk::ExpertKey key) {
    c_.slot_[s] = {key.packed(), State::loading, 1};
    c_.where_[key.packed()] = s;
    lease_.slots_.push_back(s);
    jobs_.push_back({s, key.layer, key.expert});
  }
  ExpertCache& c_;
  Lease& lease_;
  std::vector<Job>& jobs_;
};

ExpertCache::ExpertCache(const ModelConfig& c, const CheckpointIndex& index, sdk::StorageBackend& storage,
                         std::shared_ptr<sdk::CachePolicy> policy, std::shared_ptr<const CacheFuture> future,
                         std::uint64_t slots, std::uint64_t slot_bytes, int attempts,
                         runtime::StreamCounters& counters)
    : c_(c),
      index_(index),
      policy_(std::move(policy)),
      future_(std::move(future)),
      counters_(counters),
      slot_count_(slots),
      slot_bytes_(slot_bytes),
      attempts_(std::max(1, attempts)),
      files_(index, storage) {
  if (policy_->wants_future() && !future_)
    throw UsageError("the cache policy needs the future request stream (cache.future): record it with "
                     "--set trace.out=FILE in an earlier run of this pipeline");
  if (slot_count_ == 0) throw UsageError("the expert cache needs at least one slot");

  // Every routed expert's six tensors (the tensor table's order), checked once.
  const auto moe_layers = static_cast<std::size_t>(c.num_hidden_layers - c.first_k_dense_replace);
  const auto NE = static_cast<std::size_t>(c.num_experts);
  tensors_.reserve(moe_layers * NE * 6);
  for (std::size_t m = 0; m < moe_layers; ++m) {
    const auto layer = static_cast<std::int64_t>(m) + c.first_k_dense_replace;
    for (std::size_t e = 0; e < NE; ++e)
      table::for_each_expert_tensor(c, layer, static_cast<std::int64_t>(e), [&](const table::Entry& t, const auto&) {
        tensors_.push_back(&table::require(index, t));
      });
  }
  std::uint64_t at = 0;
  for (int k = 0; k < 6; ++k) {
    at = align_up(at, kTensorAlign);
    offsets_[k] = at;
    at += tensors_.empty() ? 0 : tensors_[static_cast<std::size_t>(k)]->nbytes;
  }
  if (at > slot_bytes_)
    throw RuntimeError("expert cache: a slot of " + std::to_string(slot_bytes_) + " bytes cannot hold an expert of " +
                       std::to_string(at));

  const sdk::Status st = policy_->reset(slot_count_);
  if (!st.ok()) throw UsageError("cache policy refused " + std::to_string(slot_count_) + " slots: " + st.detail);
  if (policy_->wants_future()) {
    const sdk::Status fs = policy_->set_future(future_->keys);
    if (!fs.ok()) throw UsageError(future_->source + ": the cache policy refused the future: " + fs.detail);
  }
  arena_ = AlignedBuffer(slot_count_ * slot_bytes_);
  slot_.resize(slot_count_);
  free_.reserve(slot_count_);
  for (std::size_t s = slot_count_; s-- > 0;) free_.push_back(static_cast<std::uint32_t>(s));
  // read_batch() publishes each group of a batch itself as it lands.
  reader_.start(
      4, [this](std::vector<Job>& jobs) { read_batch(jobs); },
      [this](std::vector<Job>& jobs, std::exception_ptr error) {
        if (error) fail_batch(jobs, std::move(error));
      });
}

ExpertCache::~ExpertCache() = default;

void ExpertCache::fail_batch(const std::vector<Job>& jobs, std::exception_ptr error) noexcept {
  try {
    std::string why = "reading failed";
    try {
      std::rethrow_exception(std::move(error));
    } catch (const std::exception& e) {
      why = e.what();
    } catch (...) {
    }
    for (const Job& j : jobs) {
      Slot& s = slot_[j.slot];
      if (s.state != State::loading) continue;
      s.state = State::failed;
      where_.erase(s.key);
      policy_->on_remove(sdk::ExpertKey::unpack(s.key));
      counters_.add_failure("layer " + std::to_string(j.layer) + " expert " + std::to_string(j.expert) + ": " + why);
    }
  } catch (...) {
    // Out of memory while reporting: the slots stay loading and their waiters hang rather
    // than read garbage; nothing better is possible here.
  }
}

const TensorInfo& ExpertCache::tensor(std::uint32_t layer, std::uint32_t expert, int k) const {
  const std::size_t m = layer - static_cast<std::size_t>(c_.first_k_dense_replace);
  return *tensors_[(m * static_cast<std::size_t>(c_.num_experts) + expert) * 6 + static_cast<std::size_t>(k)];
}

void ExpertCache::follow_future(std::size_t layer, std::span<const std::uint32_t> requests) const {
  const CacheFuture& f = *future_;
  const std::string head = "cache.future " + f.source + ": this run diverged from the recorded trace at request ";
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const std::uint64_t seq = seq_ + i;
    const sdk::ExpertKey key{static_cast<std::uint32_t>(layer), requests[i]};
    if (seq >= f.keys.size())
      throw UsageError(head + std::to_string(seq) + ": the trace ends after " + std::to_string(f.keys.size()) +
                       " requests (this run computes more tokens; record the trace again with the same pipeline)");
    if (!(f.keys[seq] == key))
      throw UsageError(head + std::to_string(seq) + ": this run requests " + describe_key(key) + ", the trace " +
                       describe_key(f.keys[seq]) + " (another prompt, sampling or decode mode?)");
    if ((f.starts_group[seq] != 0) != (i == 0))
      throw UsageError(head + std::to_string(seq) + ": the trace serves requests in other groups (another "
                       "job.prefill_chunk or decode mode?)");
  }
  const std::uint64_t end = seq_ + requests.size();
  if (end < f.keys.size() && f.starts_group[end] == 0)
    throw UsageError(head + std::to_string(end) + ": the trace serves requests in other groups (another "
                     "job.prefill_chunk or decode mode?)");
}

void ExpertCache::route(std::size_t layer, std::span<const std::uint32_t> requests) {
  const auto lk = reader_.lock();
  if (future_) follow_future(layer, requests);
  routed_.clear();
  for (std::uint32_t e : requests) {
    const sdk::ExpertKey key{static_cast<std::uint32_t>(layer), e};
    policy_->on_access(key, seq_++);
    ++routed_[key.packed()];
  }
  counters_.expert_requests += requests.size();
}

ExpertCache::Lease ExpertCache::request(std::size_t layer, std::span<const std::uint32_t> ids) {
  if (ids.size() > slot_count_)
    throw RuntimeError("expert cache: " + std::to_string(ids.size()) + " experts requested at once, " +
                       std::to_string(slot_count_) + " slots");
  // The lease outlives the lock: if serving fails, the lock is dropped before the lease
  // releases its slots (release() takes the lock).
  Lease lease;
  lease.cache_ = this;
  std::vector<Job> jobs;
  const auto lk = reader_.lock();
  Arena arena(*this, lease, jobs);
  ServeCounts counts;
  const auto uses = [&](std::size_t i) -> std::uint64_t {
    const auto it = routed_.find(sdk::ExpertKey{static_cast<std::uint32_t>(layer), ids[i]}.packed());
    return it == routed_.end() ? 1 : it->second;
  };
  serve_batch(*policy_, arena, static_cast<std::uint32_t>(layer), ids, uses, counts,
              [](const std::string& why) { throw RuntimeError("expert cache: " + why); });
  counters_.expert_hits += counts.hits;
  // serve_batch leases the hits before the misses; wait() hands out ids[i]'s expert as
  // out[i], so the lease lists the slots in the order of `ids`.
  for (std::size_t i = 0; i < ids.size(); ++i)
    lease.slots_[i] = where_.at(sdk::ExpertKey{static_cast<std::uint32_t>(layer), ids[i]}.packed());
  if (!jobs.empty()) reader_.push(std::move(jobs));
  return lease;
}

void ExpertCache::read_batch(std::vector<Job>& jobs) {
  // One request per tensor; per shard one batch in offset order.
  struct Item {
    std::size_t job;
    std::uint32_t file;
    sdk::ReadRequest req;
  };
  auto items_of = [&](std::size_t j) {
    std::vector<Item> out;
    for (int k = 0; k < 6; ++k) {
      const TensorInfo& t = tensor(jobs[j].layer, jobs[j].expert, k);
      out.push_back({j, t.file, {t.offset, t.nbytes, slot_data(jobs[j].slot) + offsets_[k], sdk::StatusCode::ok}});
    }
    return out;
  };
  std::vector<std::string> error(jobs.size());
  auto read_items = [&](std::vector<Item>& items) {
    std::map<std::uint32_t, std::vector<std::size_t>> by_file;
    for (std::size_t i = 0; i < items.size(); ++i) by_file[items[i].file].push_back(i);
    for (auto& [file, idx] : by_file) {
      std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return items[a].req.offset < items[b].req.offset; });
      std::vector<sdk::ReadRequest> batch;
      for (std::size_t i : idx) batch.push_back(items[i].req);
      sdk::Status st;
      try {
        runtime::ScopedTimer t(counters_.read_ns);
        st = files_.file(file).read(batch);
      } catch (const std::exception& ex) {
        st = sdk::Status{sdk::StatusCode::io_error, ex.what()};
        for (auto& r : batch) r.result = sdk::StatusCode::io_error;
      }
      for (std::size_t b = 0; b < idx.size(); ++b) {
        Item& it = items[idx[b]];
        it.req.result = batch[b].result;
        if (it.req.result != sdk::StatusCode::ok)
          error[it.job] = st.detail.empty() ? std::string("read failed") : st.detail;
      }
    }
  };

  // Experts in disk order, read in groups of at least kGroupBytes. Each group is published
  // as soon as it lands, so the compute thread multiplies the first experts of a layer while
  // the later ones are still being read; a group stays large enough for the backend to keep
  // many requests in flight.
  constexpr std::uint64_t kGroupBytes = 8ull << 20;
  auto expert_bytes = [&](std::size_t j) {
    std::uint64_t n = 0;
    for (int k = 0; k < 6; ++k) n += tensor(jobs[j].layer, jobs[j].expert, k).nbytes;
    return n;
  };
  std::vector<std::size_t> order(jobs.size());
  for (std::size_t j = 0; j < order.size(); ++j) order[j] = j;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const TensorInfo &ta = tensor(jobs[a].layer, jobs[a].expert, 0), &tb = tensor(jobs[b].layer, jobs[b].expert, 0);
    return std::pair(ta.file, ta.offset) < std::pair(tb.file, tb.offset);
  });
  for (std::size_t begin = 0; begin < order.size();) {
    std::size_t end = begin;
    std::uint64_t group_bytes = 0;
    std::vector<Item> items;
    while (end < order.size() && (end == begin || group_bytes < kGroupBytes)) {
      auto its = items_of(order[end]);
      items.insert(items.end(), its.begin(), its.end());
      group_bytes += expert_bytes(order[end]);
      ++end;
    }
    read_items(items);
    // Retry the failed experts one by one.
    for (int attempt = 1; attempt < attempts_; ++attempt)
      for (std::size_t g = begin; g < end; ++g) {
        const std::size_t j = order[g];
        if (error[j].empty()) continue;
        error[j].clear();
        auto again = items_of(j);
        read_items(again);
      }

    std::uint64_t bytes = 0;
    const auto lk = reader_.lock();
    for (std::size_t g = begin; g < end; ++g) {
      const std::size_t j = order[g];
      Slot& s = slot_[jobs[j].slot];
      if (error[j].empty()) {
        bytes += expert_bytes(j);
        s.state = State::ready;
        continue;
      }
      s.state = State::failed;
      where_.erase(s.key);
      policy_->on_remove(sdk::ExpertKey::unpack(s.key));
      counters_.add_failure("layer " + std::to_string(jobs[j].layer) + " expert " + std::to_string(jobs[j].expert) +
                            ": read failed after " + std::to_string(attempts_) + " attempts: " + error[j]);
    }
    counters_.expert_bytes += bytes;
    reader_.notify_all();
    begin = end;
  }
}

void ExpertCache::release(std::span<const std::uint32_t> slots) noexcept {
  const auto lk = reader_.lock();
  for (std::uint32_t s : slots) {
    Slot& slot = slot_[s];
    if (slot.leases > 0) --slot.leases;
    if (slot.leases == 0 && slot.state == State::failed) {
      slot.state = State::empty;
      free_.push_back(s);
    }
  }
}

ExpertCache::Lease& ExpertCache::Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    reset();
    cache_ = std::exchange(o.cache_, nullptr);
    slots_ = std::move(o.slots_);
  }
  return *this;
}

void ExpertCache::Lease::reset() noexcept {
  if (cache_ != nullptr) cache_->release(slots_);
  cache_ = nullptr;
  slots_.clear();
}

model::ExpertWeights ExpertCache::Lease::wait_one(std::size_t i) {
  ExpertCache& c = *cache_;
  const std::uint32_t s = slots_.at(i);
  auto lk = c.reader_.lock();
  if (c.slot_[s].state == State::loading) {
    runtime::ScopedTimer t(c.counters_.io_wait_ns);
    c.reader_.wait(lk, [&] { return c.slot_[s].state != State::loading; });
  }
  if (c.slot_[s].state != State::ready) return {};
  const auto I = static_cast<std::uint64_t>(c.c_.moe_intermediate_size);
  const auto L = static_cast<std::uint64_t>(c.c_.routed_expert_hidden_size);
  const std::byte* base = c.slot_data(s);
  auto mx = [&](int w, std::uint64_t rows, std::uint64_t cols) {
    return sdk::Mxfp4Matrix{reinterpret_cast<const std::uint8_t*>(base + c.offsets_[2 * w]),
                            reinterpret_cast<const std::uint8_t*>(base + c.offsets_[2 * w + 1]), rows, cols};
  };
  return {mx(0, I, L), mx(2, I, L), mx(1, L, I)};
}

}  // namespace k3::cache
