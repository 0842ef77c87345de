#include "streaming/expert_cache.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include <k3/error.hpp>
#include <k3/geometry.hpp>

#include "io/read_failure.hpp"
#include "model/tensor_table.hpp"
#include "streaming/cache_batch.hpp"

namespace k3::streaming {

namespace {
constexpr std::uint64_t kTensorAlign = 64;
// Experts are read in disk order in groups of at least this many bytes (read_batch()).
constexpr std::uint64_t kGroupBytes = 8ull << 20;
// Job lists kept for reuse, and the reader queue's room: batches rarely overlap.
constexpr std::size_t kSpareJobLists = 8;
std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }
}  // namespace

/// The slot arena as cache_batch() sees it, for one request(): leases go into `lease`,
/// reads into `jobs`. What the policy may evict: resident, read, and not leased.
class ExpertCache::Arena final : public sdk::VictimQuery {
 public:
  Arena(ExpertCache& c, Lease& lease, std::vector<Job>& jobs) : c_(c), lease_(lease), jobs_(jobs) {}
  [[nodiscard]] bool evictable(sdk::ExpertKey key) const noexcept override {
    const std::uint32_t s = c_.slot_of(key);
    return s != kNoSlot && c_.slot_[s].state == State::ready && c_.slot_[s].leases == 0;
  }
  [[nodiscard]] bool resident(sdk::ExpertKey key) const { return c_.slot_of(key) != kNoSlot; }
  void lease(sdk::ExpertKey key) {
    const std::uint32_t s = c_.slot_of(key);
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
    const std::uint32_t s = c_.slot_of(victim);
    c_.forget(victim.packed());
    load(s, key);
  }

 private:
  // serve() checked that every requested key is a routed expert, so it has an index.
  void load(std::uint32_t s, sdk::ExpertKey key) {
    c_.slot_[s] = {key.packed(), State::loading, 1};
    std::size_t at = 0;
    (void)c_.routed_key(key, at);
    c_.where_[at] = s;
    lease_.slots_.push_back(s);
    jobs_.push_back({s, key.layer, key.expert});
  }
  ExpertCache& c_;
  Lease& lease_;
  std::vector<Job>& jobs_;
};

/// What a prefetch may evict: a ready, unleased key that no computation is about to use —
/// not one the layer being computed requested (its later batches are not leased yet), not
/// a key predicted for a later layer, not another prefetch still waiting for its request.
class ExpertCache::PrefetchQuery final : public sdk::VictimQuery {
 public:
  explicit PrefetchQuery(const ExpertCache& c) : c_(c) {}
  [[nodiscard]] bool evictable(sdk::ExpertKey key) const noexcept override {
    std::size_t at = 0;
    if (!c_.routed_key(key, at)) return false;
    const std::uint32_t s = c_.where_[at];
    if (s == kNoSlot) return false;
    const Slot& slot = c_.slot_[s];
    if (slot.state != State::ready || slot.leases != 0 || slot.prefetched || c_.predicted_[at] != 0) return false;
    return !(key.layer == c_.routed_layer_ && c_.routed_[key.expert] != 0);
  }

 private:
  const ExpertCache& c_;
};

ExpertCache::ExpertCache(const ModelConfig& c, const CheckpointIndex& index, sdk::StorageBackend& storage,
                         std::shared_ptr<sdk::CachePolicy> policy, std::shared_ptr<const CacheFuture> future,
                         std::uint64_t slots, std::uint64_t slot_bytes, int attempts,
                         streaming::StreamCounters& counters)
    : c_(c),
      policy_(std::move(policy)),
      future_(std::move(future)),
      counters_(counters),
      slot_count_(slots),
      slot_bytes_(slot_bytes),
      attempts_(std::max(1, attempts)),
      demand_(index, storage),
      ahead_(index, storage) {
  if (policy_->wants_future() && !future_)
    throw UsageError(
        "the cache policy needs the future request stream (cache.future): record it with "
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
  // The shards that hold experts are opened now rather than at their first miss, which may
  // come at any token (opening allocates). A shard that does not open now is tried again at
  // that read, which then fails and is reported like any failed read.
  std::vector<bool> holds_experts(index.files().size(), false);
  for (const TensorInfo* t : tensors_) holds_experts[t->file] = true;
  for (std::uint32_t f = 0; f < holds_experts.size(); ++f) {
    if (!holds_experts[f]) continue;
    try {
      (void)demand_.files.file(f);
      (void)ahead_.files.file(f);
    } catch (const std::exception&) {
    }
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
  where_.assign(moe_layers * NE, kNoSlot);
  routed_.assign(NE, 0);

  // What one batch needs, reserved now: a batch names at most slot_count_ experts, and a
  // read group holds at most the experts of kGroupBytes (at least one).
  const std::size_t most_jobs = slot_count_;
  std::uint64_t expert_bytes = 0;  // as read_batch() counts them: the tensors' bytes
  for (std::size_t k = 0; k < 6 && !tensors_.empty(); ++k) expert_bytes += tensors_[k]->nbytes;
  expert_bytes = std::max<std::uint64_t>(1, expert_bytes);
  expert_bytes_ = expert_bytes;
  listener_ = dynamic_cast<sdk::CachePrefetchListener*>(policy_.get());
  predicted_.assign(moe_layers * NE, 0);
  layer_predicted_.assign(moe_layers, 0);
  const std::size_t group_experts = std::min<std::size_t>(most_jobs, kGroupBytes / expert_bytes + 1);
  ahead_.prefetch = true;
  for (Reading* r : {&demand_, &ahead_}) {
    r->order.reserve(most_jobs);
    r->errors.reserve(most_jobs);
    r->codes.reserve(most_jobs);
    r->tries.reserve(most_jobs);
    r->items.reserve(6 * group_experts);
    r->reads.reserve(6 * group_experts);
  }
  // Two lists cover a batch queued while another is being read, two more the prefetches
  // beside them; more are made (reserved alike) if ever needed.
  spare_jobs_.reserve(kSpareJobLists);
  most_jobs_ = most_jobs;
  for (int k = 0; k < 4; ++k) spare_jobs_.emplace_back().reserve(most_jobs);
  // read_batch() publishes each group of a batch itself as it lands; the list then goes
  // back to the pool.
  reader_.start(
      kSpareJobLists, [this](std::vector<Job>& jobs) { read_batch(jobs, demand_); },
      [this](std::vector<Job>& jobs, std::exception_ptr error) {
    if (error) fail_batch(jobs, std::move(error));
    if (spare_jobs_.size() == spare_jobs_.capacity()) return;  // pushing would allocate: let it go
    jobs.clear();
    spare_jobs_.push_back(std::move(jobs));
      },
      [this](std::vector<Job>& jobs) { read_batch(jobs, ahead_); });
}

ExpertCache::~ExpertCache() = default;

void ExpertCache::fail_batch(const std::vector<Job>& jobs, std::exception_ptr error) noexcept {
  try {
    std::string why = "reading failed";
    bool interrupted = false;
    try {
      std::rethrow_exception(std::move(error));
    } catch (const Interrupted& e) {
      why = e.what();
      interrupted = true;
    } catch (const std::exception& e) {
      why = e.what();
    } catch (...) {
    }
    for (const Job& j : jobs) {
      if (slot_[j.slot].state != State::loading) continue;
      if (j.prefetch) --prefetch_loading_;
      fail_job(j, why, interrupted);
    }
  } catch (...) {
    // Out of memory while reporting: the slots stay loading and their waiters hang rather
    // than read garbage; nothing better is possible here.
  }
}

std::vector<ExpertCache::Job> ExpertCache::take_jobs() {
  std::vector<Job> jobs;
  if (spare_jobs_.empty()) {
    jobs.reserve(most_jobs_);
    return jobs;
  }
  jobs = std::move(spare_jobs_.back());
  spare_jobs_.pop_back();
  return jobs;
}

void ExpertCache::fail_job(const Job& job, const std::string& why, bool interrupted) {
  Slot& s = slot_[job.slot];
  forget(s.key);
  policy_->on_remove(sdk::ExpertKey::unpack(s.key));
  if (job.prefetch && s.prefetched && s.leases == 0) {
    // Nobody asked for it: a wrong or unlucky guess costs nothing but the attempt.
    s = Slot{};
    free_.push_back(job.slot);
    return;
  }
  s.state = State::failed;
  s.prefetched = false;
  if (interrupted) {  // the run is stopping: not an expert the storage failed to give
    if (interrupted_.empty())
      interrupted_ = "layer " + std::to_string(job.layer) + " expert " + std::to_string(job.expert) + ": " + why;
    return;
  }
  counters_.add_failure("layer " + std::to_string(job.layer) + " expert " + std::to_string(job.expert) + ": " + why);
}

const TensorInfo& ExpertCache::tensor(std::uint32_t layer, std::uint32_t expert, int k) const {
  const std::size_t m = layer - static_cast<std::size_t>(c_.first_k_dense_replace);
  return *tensors_[(m * static_cast<std::size_t>(c_.num_experts) + expert) * 6 + static_cast<std::size_t>(k)];
}

bool ExpertCache::routed_key(sdk::ExpertKey key, std::size_t& index) const noexcept {
  const auto first = static_cast<std::uint64_t>(c_.first_k_dense_replace);
  const auto NE = static_cast<std::uint64_t>(c_.num_experts);
  if (key.layer < first || key.expert >= NE) return false;
  const std::uint64_t at = (key.layer - first) * NE + key.expert;
  if (at >= where_.size()) return false;
  index = static_cast<std::size_t>(at);
  return true;
}

std::uint32_t ExpertCache::slot_of(sdk::ExpertKey key) const noexcept {
  std::size_t at = 0;
  return routed_key(key, at) ? where_[at] : kNoSlot;
}

void ExpertCache::forget(std::uint64_t packed) noexcept {
  std::size_t at = 0;
  if (routed_key(sdk::ExpertKey::unpack(packed), at)) where_[at] = kNoSlot;
}

void ExpertCache::follow_future(std::size_t layer, std::span<const std::uint32_t> requests) const {
  const CacheFuture& f = *future_;
  // Called for every serving group: the message is built only when it is thrown.
  const auto head = [&] {
    return "cache.future " + f.source + ": this run diverged from the recorded trace at request ";
  };
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const std::uint64_t seq = seq_ + i;
    const sdk::ExpertKey key{static_cast<std::uint32_t>(layer), requests[i]};
    if (seq >= f.keys.size())
      throw UsageError(head() + std::to_string(seq) + ": the trace ends after " + std::to_string(f.keys.size()) +
                       " requests (this run computes more tokens; record the trace again with the same pipeline)");
    if (!(f.keys[seq] == key))
      throw UsageError(head() + std::to_string(seq) + ": this run requests " + describe_key(key) + ", the trace " +
                       describe_key(f.keys[seq]) + " (another prompt, sampling or decode mode?)");
    if ((f.starts_group[seq] != 0) != (i == 0))
      throw UsageError(head() + std::to_string(seq) +
                       ": the trace serves requests in other groups (another "
                       "job.prefill_chunk or decode mode?)");
  }
  const std::uint64_t end = seq_ + requests.size();
  if (end < f.keys.size() && f.starts_group[end] == 0)
    throw UsageError(head() + std::to_string(end) +
                     ": the trace serves requests in other groups (another "
                     "job.prefill_chunk or decode mode?)");
}

void ExpertCache::route(std::size_t layer, std::span<const std::uint32_t> requests) {
  const auto lk = reader_.lock();
  if (future_) follow_future(layer, requests);
  routed_layer_ = layer;
  std::fill(routed_.begin(), routed_.end(), 0);
  for (std::uint32_t e : requests) {
    const sdk::ExpertKey key{static_cast<std::uint32_t>(layer), e};
    policy_->on_access(key, seq_++);
    if (e < routed_.size()) ++routed_[e];
  }
  counters_.expert_requests += requests.size();
  score_prediction(layer);
}

void ExpertCache::score_prediction(std::size_t layer) noexcept {
  const auto first = static_cast<std::size_t>(c_.first_k_dense_replace);
  if (layer < first || layer - first >= layer_predicted_.size() || layer_predicted_[layer - first] == 0) return;
  layer_predicted_[layer - first] = 0;
  std::uint8_t* row = predicted_.data() + (layer - first) * routed_.size();
  std::uint64_t predicted = 0, routed = 0, correct = 0;
  for (std::size_t e = 0; e < routed_.size(); ++e) {
    predicted += row[e];
    routed += routed_[e] != 0 ? 1 : 0;
    correct += row[e] != 0 && routed_[e] != 0 ? 1 : 0;
    row[e] = 0;
  }
  counters_.lookahead_predicted += predicted;
  counters_.lookahead_routed += routed;
  counters_.lookahead_correct += correct;
}

void ExpertCache::request(std::size_t layer, std::span<const std::uint32_t> ids, Lease& lease) {
  if (ids.size() > slot_count_)
    throw RuntimeError("expert cache: " + std::to_string(ids.size()) + " experts requested at once, " +
                       std::to_string(slot_count_) + " slots");
  for (const std::uint32_t e : ids) {
    std::size_t at = 0;
    if (!routed_key({static_cast<std::uint32_t>(layer), e}, at))
      throw RuntimeError("expert cache: " + describe_key({static_cast<std::uint32_t>(layer), e}) +
                         " is not a routed expert of this model");
  }
  lease.reset();  // keeps its slot list's capacity
  lease.cache_ = this;
  lease.slots_.reserve(slot_count_);
  try {
    serve(layer, ids, lease);
  } catch (...) {
    // serve() dropped the lock before this releases the slots (release() takes it).
    lease.reset();
    throw;
  }
}

void ExpertCache::make_room(std::unique_lock<std::mutex>& lk, std::size_t layer, std::span<const std::uint32_t> ids) {
  if (prefetch_loading_ == 0) return;
  std::size_t room = free_.size(), missing = 0;
  for (const Slot& s : slot_) room += s.state == State::ready && s.leases == 0 ? 1 : 0;
  for (const std::uint32_t e : ids) {
    const std::uint32_t s = slot_of({static_cast<std::uint32_t>(layer), e});
    if (s == kNoSlot)
      ++missing;
    else if (slot_[s].state == State::ready && slot_[s].leases == 0)
      --room;  // a hit, leased before any miss evicts
  }
  if (room >= missing) return;
  streaming::ScopedTimer t(counters_.io_wait_ns);
  streaming::ScopedTimer e(counters_.expert_wait_ns);
  reader_.wait(lk, [&] { return prefetch_loading_ == 0; });
}

void ExpertCache::serve(std::size_t layer, std::span<const std::uint32_t> ids, Lease& lease) {
  auto lk = reader_.lock();
  make_room(lk, layer, ids);
  std::vector<Job> jobs = take_jobs();
  Arena arena(*this, lease, jobs);
  BatchCounts counts;
  const auto uses = [&](std::size_t i) -> std::uint64_t {
    const bool counted = layer == routed_layer_ && ids[i] < routed_.size() && routed_[ids[i]] != 0;
    return counted ? routed_[ids[i]] : 1;
  };
  // A prefetched expert serves its requests as a prefetch hit: cache_batch counts every
  // resident expert as a hit, so those are taken back out (and the mark cleared, so a later
  // request of it is an ordinary hit).
  std::uint64_t prefetch_hits = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::uint32_t s = slot_of({static_cast<std::uint32_t>(layer), ids[i]});
    if (s == kNoSlot || !slot_[s].prefetched) continue;
    slot_[s].prefetched = false;
    prefetch_hits += uses(i);
    ++counters_.prefetch_used;
    counters_.prefetch_used_bytes += expert_bytes_;
  }
  cache_batch(*policy_, arena, static_cast<std::uint32_t>(layer), ids, uses, counts,
              [](const std::string& why) { throw RuntimeError("expert cache: " + why); });
  counters_.expert_hits += counts.hits - prefetch_hits;
  counters_.prefetch_hits += prefetch_hits;
  // cache_batch leases the hits before the misses; wait() hands out ids[i]'s expert as
  // out[i], so the lease lists the slots in the order of `ids`.
  for (std::size_t i = 0; i < ids.size(); ++i) lease.slots_[i] = slot_of({static_cast<std::uint32_t>(layer), ids[i]});
  if (!jobs.empty())
    reader_.push(std::move(jobs));
  else if (spare_jobs_.size() < spare_jobs_.capacity())
    spare_jobs_.push_back(std::move(jobs));
}

void ExpertCache::set_prefetch(std::size_t depth, std::uint64_t bytes_per_token) {
  const auto lk = reader_.lock();
  prefetch_depth_ = depth;
  prefetch_bytes_per_token_ = bytes_per_token;
}

void ExpertCache::prefetch(std::size_t layer, std::span<const std::uint32_t> ids, std::size_t tokens) {
  const auto lk = reader_.lock();
  if (prefetch_depth_ == 0) return;
  const auto first = static_cast<std::size_t>(c_.first_k_dense_replace);
  const std::size_t NE = routed_.size();
  if (layer < first || layer - first >= layer_predicted_.size()) return;
  // The prediction is marked whole (for its accuracy, and so that no prefetch evicts a
  // predicted key), before the byte limit cuts the reads.
  std::uint8_t* row = predicted_.data() + (layer - first) * NE;
  for (const std::uint32_t e : ids)
    if (e < NE) row[e] = 1;
  layer_predicted_[layer - first] = 1;

  std::uint64_t most = ~std::uint64_t{0};  // experts this prediction may read
  if (prefetch_bytes_per_token_ != 0)
    most = prefetch_bytes_per_token_ * tokens / (layer_predicted_.size() * expert_bytes_);
  std::vector<Job> jobs = take_jobs();
  const PrefetchQuery query(*this);
  // The keys a prefetch may evict, counted first: a policy that finds none answers with a
  // message (a string: an allocation), and with a full cache that is the common case.
  std::size_t evictable = 0;
  if (free_.size() < ids.size())
    for (const Slot& s : slot_)
      if (s.state == State::ready && query.evictable(sdk::ExpertKey::unpack(s.key))) ++evictable;
  for (const std::uint32_t e : ids) {
    if (jobs.size() >= most) break;
    const sdk::ExpertKey key{static_cast<std::uint32_t>(layer), e};
    std::size_t at = 0;
    if (!routed_key(key, at) || where_[at] != kNoSlot) continue;  // resident or on its way
    std::uint32_t s = kNoSlot;
    if (!free_.empty()) {
      s = free_.back();
      free_.pop_back();
    } else {
      // A victim the policy picks among what the query allows; none (or one it should not
      // have offered) ends this prefetch: a guess never forces anything out.
      if (evictable == 0) break;
      sdk::ExpertKey victim{};
      if (!policy_->choose_victim(key, query, victim).ok() || !query.evictable(victim)) break;
      --evictable;
      s = slot_of(victim);
      forget(victim.packed());
      policy_->on_remove(victim);
    }
    slot_[s] = {key.packed(), State::loading, 0, true};
    where_[at] = s;
    jobs.push_back({s, key.layer, key.expert, true});
    policy_->on_insert(key);
    if (listener_ != nullptr) listener_->on_prefetch(key);
  }
  prefetch_loading_ += jobs.size();
  counters_.prefetch_experts += jobs.size();
  counters_.prefetch_bytes += jobs.size() * expert_bytes_;
  if (!jobs.empty())
    reader_.push_low(std::move(jobs));
  else if (spare_jobs_.size() < spare_jobs_.capacity())
    spare_jobs_.push_back(std::move(jobs));
}

void ExpertCache::append_items(const Job& job, std::size_t j, Reading& r) {
  for (int k = 0; k < 6; ++k) {
    const TensorInfo& t = tensor(job.layer, job.expert, k);
    r.items.push_back({j, t.file, {t.offset, t.nbytes, slot_data(job.slot) + offsets_[k], sdk::StatusCode::ok}});
  }
}

void ExpertCache::read_items(std::span<Item> items, Reading& r) {
  // Per shard one batch, in offset order.
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return std::pair(a.file, a.req.offset) < std::pair(b.file, b.req.offset);
  });
  for (std::size_t begin = 0; begin < items.size();) {
    const std::uint32_t file = items[begin].file;
    std::size_t end = begin;
    r.reads.clear();
    for (; end < items.size() && items[end].file == file; ++end) r.reads.push_back(items[end].req);
    sdk::Status st;
    try {
      streaming::ScopedTimer t(counters_.read_ns);
      if (r.prefetch && !r.files.is_open(file)) throw RuntimeError("shard not open (a prefetch opens none)");
      st = r.files.file(file).read(r.reads);
    } catch (const std::exception& ex) {
      st = sdk::Status{sdk::StatusCode::io_error, ex.what()};
      for (auto& q : r.reads) q.result = sdk::StatusCode::io_error;
    }
    for (std::size_t i = begin; i < end; ++i) {
      Item& it = items[i];
      it.req.result = r.reads[i - begin].result;
      if (it.req.result != sdk::StatusCode::ok) {
        r.errors[it.job] = st.detail.empty() ? std::string("read failed") : st.detail;
        r.codes[it.job] = st.code;
      }
    }
    begin = end;
  }
}

void ExpertCache::read_batch(std::vector<Job>& jobs, Reading& r) {
  // One request per tensor; per shard one batch in offset order.
  std::vector<std::string>& errors = r.errors;
  errors.assign(jobs.size(), std::string());
  r.codes.assign(jobs.size(), sdk::StatusCode::ok);
  r.tries.assign(jobs.size(), 1);

  // Experts in disk order, read in groups of at least kGroupBytes. Each group is published
  // as soon as it lands, so the compute thread multiplies the first experts of a layer while
  // the later ones are still being read; a group stays large enough for the backend to keep
  // many requests in flight.
  auto expert_bytes = [&](std::size_t j) {
    std::uint64_t n = 0;
    for (int k = 0; k < 6; ++k) n += tensor(jobs[j].layer, jobs[j].expert, k).nbytes;
    return n;
  };
  std::vector<std::size_t>& order = r.order;
  order.resize(jobs.size());
  for (std::size_t j = 0; j < order.size(); ++j) order[j] = j;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const TensorInfo &ta = tensor(jobs[a].layer, jobs[a].expert, 0), &tb = tensor(jobs[b].layer, jobs[b].expert, 0);
    return std::pair(ta.file, ta.offset) < std::pair(tb.file, tb.offset);
  });
  for (std::size_t begin = 0; begin < order.size();) {
    std::size_t end = begin;
    std::uint64_t group_bytes = 0;
    r.items.clear();
    while (end < order.size() && (end == begin || group_bytes < kGroupBytes)) {
      append_items(jobs[order[end]], order[end], r);
      group_bytes += expert_bytes(order[end]);
      ++end;
    }
    read_items(r.items, r);
    // Retry the failed experts one by one (not what the storage timed out or abandoned).
    for (int attempt = 1; attempt < attempts_; ++attempt)
      for (std::size_t g = begin; g < end; ++g) {
        const std::size_t j = order[g];
        if (errors[j].empty() || !io::worth_retrying(r.codes[j])) continue;
        errors[j].clear();
        ++r.tries[j];
        r.items.clear();
        append_items(jobs[j], j, r);
        read_items(r.items, r);
      }

    std::uint64_t bytes = 0;
    const auto lk = reader_.lock();
    for (std::size_t g = begin; g < end; ++g) {
      const std::size_t j = order[g];
      Slot& s = slot_[jobs[j].slot];
      if (jobs[j].prefetch) --prefetch_loading_;
      if (errors[j].empty()) {
        bytes += expert_bytes(j);
        s.state = State::ready;
        continue;
      }
      fail_job(jobs[j],
               "read failed after " + std::to_string(r.tries[j]) + (r.tries[j] == 1 ? " attempt: " : " attempts: ") +
                   errors[j],
               r.codes[j] == sdk::StatusCode::interrupted);
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

maths::ExpertWeights ExpertCache::Lease::wait_one(std::size_t i) {
  ExpertCache& c = *cache_;
  const std::uint32_t s = slots_.at(i);
  auto lk = c.reader_.lock();
  if (c.slot_[s].state == State::loading) {
    streaming::ScopedTimer t(c.counters_.io_wait_ns);
    streaming::ScopedTimer e(c.counters_.expert_wait_ns);
    c.reader_.wait(lk, [&] { return c.slot_[s].state != State::loading; });
  }
  if (c.slot_[s].state != State::ready) {
    if (!c.interrupted_.empty()) {
      const std::string why = c.interrupted_;
      throw Interrupted(why);
    }
    return {};
  }
  const auto I = static_cast<std::uint64_t>(c.c_.moe_intermediate_size);
  const auto L = static_cast<std::uint64_t>(c.c_.routed_expert_hidden_size);
  const std::byte* base = c.slot_data(s);
  auto mx = [&](int w, std::uint64_t rows, std::uint64_t cols) {
    return sdk::Mxfp4Matrix{reinterpret_cast<const std::uint8_t*>(base + c.offsets_[2 * w]),
                            reinterpret_cast<const std::uint8_t*>(base + c.offsets_[2 * w + 1]), rows, cols};
  };
  return {mx(0, I, L), mx(2, I, L), mx(1, L, I)};
}

}  // namespace k3::streaming
