// The routed-expert cache (docs/streaming.md "Expert cache"): a fixed arena of slots, one
// expert (its six MXFP4 tensors) per slot; the cache policy plugin chooses victims; a leased
// slot is never evicted. Each request() is one batch of reads for the misses, in disk-offset
// order, through the storage plugin, on a reader thread, so the caller computes meanwhile
// (the shared expert) and then waits on the lease.
//
// Policy events follow sdk/k3/cache_policy.hpp: route() calls on_access for every
// (token, expert) request of a chunk-layer (a serving group) in request order; each
// request() then serves one batch through cache_batch() (streaming/cache_batch.hpp, the code
// the simulator runs too): the batch's resident experts are leased first, then each miss
// gets on_insert (free slot) or choose_victim + on_remove + on_insert. A failed read gets
// on_remove.
//
// A policy that wants the future (belady) gets the trace of an earlier run (cache.future)
// with set_future(); route() then checks that this run requests exactly what the trace
// recorded, in the same serving groups, and throws UsageError naming the trace and the
// first request that differs.
//
// Failures: a read that fails is retried (attempts in total; a timed_out or interrupted one
// is not: io/read_failure.hpp); then the expert is recorded in the counters ("layer L expert
// E: …"), its slot freed, and wait() hands out null matrices (zero contribution). The run
// goes on; the job exits 4. A read the storage abandoned because the run is stopping
// (interrupted) is no failed expert: wait() throws k3::Interrupted instead.
//
// Router-lookahead prefetch (docs/cache.md, "Router-lookahead prefetch"): prefetch() reads
// predicted experts of a later layer into free slots or victims the policy chooses, as a
// low-priority batch that a second reader thread reads (so a demand read never queues
// behind a guess; the storage serves both at once). A prefetched key gets on_insert
// (no on_access) and on_prefetch for a policy that listens (k3/cache_prefetch.hpp); the
// first request that finds it counts as a prefetch hit, not an expert hit. A prefetch never
// evicts a leased key, a key of the layer being computed, a predicted key, or another
// prefetched key not yet used; a prefetch that fails to read is dropped silently (the
// request reads it again). With prefetch off nothing here differs, so `k3host sim` still
// reproduces a live run's hits exactly.
//
// Nothing here allocates per token once the first tokens ran: the residency map and the
// chunk's request counts are flat arrays over (layer, expert), a lease keeps its slot list
// from one request to the next, reader batches come from a pool of reserved job lists,
// the reader's scratch is kept, and messages are built only on failure.
#pragma once
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <k3/cache_policy.hpp>
#include <k3/cache_prefetch.hpp>
#include <k3/checkpoint.hpp>
#include <k3/model_config.hpp>
#include <k3/storage.hpp>

#include "maths/blocks/blocks.hpp"
#include "streaming/cache_future.hpp"
#include "streaming/stream_counters.hpp"
#include "streaming/tensor_reader.hpp"
#include "util/aligned_buffer.hpp"
#include "util/reader_thread.hpp"

namespace k3::streaming {

class ExpertCache {
 public:
  /// `slots` slots of `slot_bytes` each (from the plan). `future` is the request stream
  /// for a policy that wants it (null otherwise). UsageError when an expert tensor does not
  /// match the config, or the policy wants the future and none is given.
  ExpertCache(const ModelConfig& c, const CheckpointIndex& index, sdk::StorageBackend& storage,
              std::shared_ptr<sdk::CachePolicy> policy, std::shared_ptr<const CacheFuture> future, std::uint64_t slots,
              std::uint64_t slot_bytes, int attempts, streaming::StreamCounters& counters);
  ~ExpertCache();
  ExpertCache(const ExpertCache&) = delete;
  ExpertCache& operator=(const ExpertCache&) = delete;

  /// Holds the slots of one request() (leased: never evicted) until reset or destroyed.
  /// Move-only. Its slot list is kept across reset(), so reusing a lease allocates nothing.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept : cache_(std::exchange(o.cache_, nullptr)), slots_(std::move(o.slots_)) {}
    Lease& operator=(Lease&& o) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { reset(); }
    /// Blocks until the i-th requested id is read and returns it (null matrices when it
    /// failed to load). The reader publishes experts in disk order as they land. Throws
    /// k3::Interrupted when the storage abandoned a read on a stop request.
    maths::ExpertWeights wait_one(std::size_t i);
    void reset() noexcept;

   private:
    friend class ExpertCache;
    ExpertCache* cache_ = nullptr;
    std::vector<std::uint32_t> slots_;
  };

  [[nodiscard]] std::size_t slots() const noexcept { return slot_count_; }
  /// Router lookahead: predict `depth` MoE layers ahead (0 = off), reading ahead at most
  /// `bytes_per_token` × tokens ÷ MoE layers per prediction (0 = no byte limit).
  void set_prefetch(std::size_t depth, std::uint64_t bytes_per_token);
  [[nodiscard]] std::size_t prefetch_depth() const noexcept { return prefetch_depth_; }
  /// Reads the experts `ids` (likeliest first) of the later MoE layer `layer` ahead, those
  /// not resident, within the byte limit, into free slots or evictable victims; returns at
  /// once. Counts the prediction's accuracy when `layer` is routed.
  void prefetch(std::size_t layer, std::span<const std::uint32_t> ids, std::size_t tokens);
  /// on_access for every request of the chunk (token-major, top-k order); counts requests.
  /// With a future: UsageError when the requests or their grouping differ from the trace.
  void route(std::size_t layer, std::span<const std::uint32_t> requests);
  /// Leases the experts `ids` (distinct, at most slots()) of MoE layer `layer` into `lease`
  /// (which first releases what it held): hits at once, misses read as one batch by the
  /// reader thread. Returns immediately.
  void request(std::size_t layer, std::span<const std::uint32_t> ids, Lease& lease);

 private:
  enum class State : std::uint8_t { empty, loading, ready, failed };
  struct Slot {
    std::uint64_t key = 0;
    State state = State::empty;
    std::uint32_t leases = 0;
    bool prefetched = false;  ///< read ahead and not requested since
  };
  struct Job {
    std::uint32_t slot;
    std::uint32_t layer, expert;
    bool prefetch = false;
  };
  class Arena;
  class PrefetchQuery;
  /// A tensor read of read_batch(): job `job`'s tensor, from shard `file`.
  struct Item {
    std::size_t job;
    std::uint32_t file;
    sdk::ReadRequest req;
  };
  static constexpr std::uint32_t kNoSlot = ~std::uint32_t{0};

  void serve(std::size_t layer, std::span<const std::uint32_t> ids, Lease& lease);
  /// One reader thread's shard handles and read_batch() scratch (reserved for the largest
  /// batch): the demand reader's, and the prefetch reader's, which reads at the same time.
  struct Reading {
    Reading(const CheckpointIndex& index, sdk::StorageBackend& storage) : files(index, storage) {}
    streaming::TensorReader files;
    bool prefetch = false;  ///< opens no shard itself (open() is one thread at a time)
    std::vector<std::size_t> order;
    std::vector<Item> items;
    std::vector<sdk::ReadRequest> reads;
    std::vector<std::string> errors;
    std::vector<sdk::StatusCode> codes;  ///< [job]: of its last failed read (with errors)
    std::vector<int> tries;              ///< [job]: reads made
  };
  void read_batch(std::vector<Job>& jobs, Reading& r);
  /// Reads `items` (sorted here by shard and offset), one batch per shard; a failed read
  /// records its message in r.errors[job].
  void read_items(std::span<Item> items, Reading& r);
  void append_items(const Job& job, std::size_t j, Reading& r);
  /// A batch whose reading threw: its experts still loading fail (under the lock).
  void fail_batch(const std::vector<Job>& jobs, std::exception_ptr error) noexcept;
  void release(std::span<const std::uint32_t> slots) noexcept;
  void follow_future(std::size_t layer, std::span<const std::uint32_t> requests) const;
  [[nodiscard]] std::byte* slot_data(std::uint32_t s) { return arena_.data() + std::size_t{s} * slot_bytes_; }
  [[nodiscard]] const TensorInfo& tensor(std::uint32_t layer, std::uint32_t expert, int k) const;
  /// Sets `index` to (layer, expert)'s place in the flat per-expert arrays; false for a key
  /// outside the routed experts (a policy may name anything).
  [[nodiscard]] bool routed_key(sdk::ExpertKey key, std::size_t& index) const noexcept;
  /// The slot holding `key` (loading or ready), or kNoSlot.
  [[nodiscard]] std::uint32_t slot_of(sdk::ExpertKey key) const noexcept;
  /// The key (packed) no longer occupies a slot.
  void forget(std::uint64_t packed) noexcept;
  /// A job list from the pool, or a new one reserved for the largest batch (under the lock).
  std::vector<Job> take_jobs();
  /// A job's read failed (under the lock): an unrequested prefetch frees its slot quietly,
  /// anything else is recorded as a failed expert, unless the storage abandoned it on a
  /// stop request (`interrupted`): then wait() throws.
  void fail_job(const Job& job, const std::string& why, bool interrupted = false);
  /// route(): the prediction made for `layer` against its distinct requests (routed_).
  void score_prediction(std::size_t layer) noexcept;
  /// serve(): a slot being read ahead cannot be evicted; when the batch would lack slots
  /// because of them, waits until they land (under `lk`).
  void make_room(std::unique_lock<std::mutex>& lk, std::size_t layer, std::span<const std::uint32_t> ids);

  const ModelConfig& c_;
  std::shared_ptr<sdk::CachePolicy> policy_;
  std::shared_ptr<const CacheFuture> future_;  // the span set_future() got points into it
  streaming::StreamCounters& counters_;
  std::size_t slot_count_;
  std::size_t slot_bytes_;
  int attempts_;
  std::uint64_t offsets_[6] = {};           // tensor offsets inside a slot (w1, w2, w3 × packed, scale)
  std::vector<const TensorInfo*> tensors_;  // [moe layer][expert][6]
  AlignedBuffer arena_;
  std::vector<Slot> slot_;
  std::vector<std::uint32_t> free_;
  std::vector<std::uint32_t> where_;          // [moe layer][expert] → slot (loading or ready), or kNoSlot
  std::size_t routed_layer_ = 0;              // the layer route() saw last
  std::vector<std::uint64_t> routed_;         // [expert] → requests of routed_layer_ in this chunk
  std::vector<std::vector<Job>> spare_jobs_;  // job lists the reader is done with, capacity kept
  std::size_t most_jobs_ = 0;                 // the most jobs of one batch
  std::uint64_t seq_ = 0;

  // Router lookahead.
  std::size_t prefetch_depth_ = 0;
  std::uint64_t prefetch_bytes_per_token_ = 0;
  std::uint64_t expert_bytes_ = 0;                  // an expert's tensors' bytes (all are alike)
  sdk::CachePrefetchListener* listener_ = nullptr;  // the policy, when it listens
  std::vector<std::uint8_t> predicted_;             // [moe layer][expert]: predicted, not yet routed
  std::vector<std::uint8_t> layer_predicted_;       // [moe layer]: a prediction is pending
  std::size_t prefetch_loading_ = 0;                // prefetched slots still being read
  std::string interrupted_;  // non-empty: a read was abandoned on a stop request (what wait() throws)

  Reading demand_;  // the reader thread's
  Reading ahead_;   // the prefetch thread's
  // Its lock guards everything above that changes (slots, maps, policy calls).
  util::ReaderThread<std::vector<Job>> reader_;  // last: stopped before the arena goes
};

/// The model's ExpertSource over an ExpertCache: one lease per request(), dropped at release().
class StreamedExperts final : public maths::ExpertSource {
 public:
  explicit StreamedExperts(ExpertCache& cache) : cache_(cache) {}
  void route(std::size_t layer, std::span<const std::uint32_t> requests) override { cache_.route(layer, requests); }
  [[nodiscard]] std::size_t max_batch() const override { return cache_.slots(); }
  void request(std::size_t layer, std::span<const std::uint32_t> ids) override { cache_.request(layer, ids, lease_); }
  maths::ExpertWeights wait_one(std::size_t, std::size_t i) override { return lease_.wait_one(i); }
  void release(std::size_t) override { lease_.reset(); }
  [[nodiscard]] std::size_t lookahead_depth() const override { return cache_.prefetch_depth(); }
  void prefetch(std::size_t, std::size_t layer, std::span<const std::uint32_t> ids, std::size_t tokens) override {
    cache_.prefetch(layer, ids, tokens);
  }

 private:
  ExpertCache& cache_;
  ExpertCache::Lease lease_;
};

}  // namespace k3::streaming
