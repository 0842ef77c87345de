// The model side of the server: one Runtime, a session per sequence slot, the snapshot
// store, and the step scheduler (k3/scheduler.hpp) that decodes the running requests
// together on a thread of its own. A request (from one of the queue's workers) takes a free
// slot, decides where it starts (the slot's own session when its tokens are a prefix of the
// request's ids, else the longest stored snapshot that is, else from scratch; docs/serve.md,
// "Prefix reuse"), joins the scheduler at its next step and waits until it is done; its
// tokens reach it on the scheduler's thread. Up to the plan's serve.parallel requests run at
// once.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <k3/chat.hpp>
#include <k3/generate.hpp>
#include <k3/model.hpp>
#include <k3/runtime.hpp>
#include <k3/scheduler.hpp>
#include <k3/serve.hpp>

#include "serve/prefix_store.hpp"

namespace k3::serve {

class LatencyMetrics;

struct RunRequest {
  std::vector<std::uint32_t> ids;  ///< the whole prompt (non-empty, fits the context)
  std::int64_t max_tokens = 16;
  SamplingSettings sampling;
  std::vector<std::uint32_t> stop_ids;  ///< besides the model's EOS
  /// Set from anywhere to end the run at its next boundary (prefill chunk or token).
  std::atomic<bool>* stop = nullptr;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  /// After each generated token, on the scheduler's thread; may set *stop.
  std::function<void(std::uint32_t)> on_token;
};

struct RunResult {
  std::vector<std::uint32_t> generated;
  std::int64_t cached = 0;  ///< prompt tokens not prefilled (resumed from a session state)
  bool stopped_at_eos = false;
  bool timed_out = false;
  bool interrupted = false;        ///< *stop ended it (a stop string, a disconnect, shutdown, a timeout)
  double prefill_seconds = 0;      ///< restoring + prefilling, up to the first token's logits
  double first_token_seconds = 0;  ///< from the start of run() to the first token
  double decode_seconds = 0;       ///< after the first token
  /// Seconds between consecutive generated tokens as they were handed out (drafts the model
  /// confirmed arrive together, a few microseconds apart).
  std::vector<double> token_gaps;
};

/// What the scheduler's steps held since load (the /metrics batch figures).
struct StepCounters {
  std::uint64_t steps = 0;             ///< forward passes
  std::uint64_t sequences = 0;         ///< sequences in them, summed (÷ steps: the mean batch)
  std::uint64_t rows = 0;              ///< tokens fed, summed
  std::vector<std::uint64_t> by_size;  ///< [n]: steps of n sequences, n = 0 … parallel
};

struct EngineStats {
  std::uint64_t snapshot_bytes = 0, snapshots = 0, evictions = 0;
  std::uint64_t live_hits = 0, snapshot_hits = 0, misses = 0;
  std::size_t parallel = 1;  ///< sequence slots
  std::size_t active = 0;    ///< sequences running now
  StepCounters steps;
};

class Engine {
 public:
  /// Starts the scheduler's thread; the slots' sessions are made here (the plan counted them).
  /// `latency` (may be null) sees every request's first token and token gaps.
  Engine(std::unique_ptr<Runtime> runtime, const GenerateSettings& defaults, const ServeOptions& options,
         LatencyMetrics* latency = nullptr);
  ~Engine();  ///< stop(), then joins the scheduler's thread
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  [[nodiscard]] Runtime& runtime() noexcept { return *runtime_; }
  [[nodiscard]] const chat::ChatTokens& chat_tokens() const noexcept { return chat_; }
  [[nodiscard]] std::int64_t context() const noexcept { return context_; }
  [[nodiscard]] std::uint32_t eos() const noexcept { return defaults_.eos_token; }
  /// Requests that run at once: the plan's serve.parallel.
  [[nodiscard]] std::size_t parallel() const noexcept { return slots_.size(); }
  [[nodiscard]] EngineStats stats() const;

  /// Runs one request to its end (from any thread; at most parallel() at once, which the
  /// server's queue guarantees). Its on_token calls come from the scheduler's thread. The
  /// request's errors (a prompt the context cannot hold, a failed forward pass) propagate.
  RunResult run(const RunRequest& request);
  /// Ends the scheduler's thread once no request runs (the queue stopped them).
  void stop();

 private:
  struct Slot {
    std::unique_ptr<Session> session;
    bool busy = false;
    std::uint64_t used = 0;  ///< when it last finished a request (least recently used first)
  };
  /// A request waiting for the scheduler, and how it is told that it is done.
  struct Waiting {
    Sequence* sequence = nullptr;
    bool done = false;
  };

  void schedule();
  std::size_t take_slot(const std::vector<std::uint32_t>& ids, std::size_t max_len, std::size_t& start,
                        SessionSnapshot& restore_from);
  void keep(const Session& session);
  void run_on_scheduler(Sequence& sequence);

  std::unique_ptr<Runtime> runtime_;
  LatencyMetrics* latency_ = nullptr;
  chat::ChatTokens chat_;
  GenerateSettings defaults_;
  ServeOptions options_;
  std::int64_t context_ = 0;
  mutable std::mutex m_;              ///< the slots, the store, the stats, the inbox
  std::condition_variable wake_;      ///< the scheduler: a request arrived, or stop
  std::condition_variable finished_;  ///< the requests: one is done
  std::vector<Slot> slots_;
  std::uint64_t uses_ = 0;
  PrefixStore<SessionSnapshot> store_;
  EngineStats stats_;
  std::deque<Waiting*> inbox_;
  std::vector<Waiting*> running_;  ///< the scheduler's thread only
  bool stopping_ = false;
  std::unique_ptr<StepScheduler> scheduler_;
  std::thread thread_;
};

}  // namespace k3::serve
