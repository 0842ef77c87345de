// The model side of the server: one Runtime, one live Session and the snapshot store. It
// runs one request at a time (the server's queue guarantees that) and decides where each
// request starts: the live session when its tokens are a prefix of the request's ids, else
// the longest stored snapshot that is, else a fresh session (docs/serve.md, "Prefix reuse").
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <k3/chat.hpp>
#include <k3/generate.hpp>
#include <k3/model.hpp>
#include <k3/runtime.hpp>
#include <k3/serve.hpp>

#include "serve/prefix_store.hpp"

namespace k3::serve {

struct RunRequest {
  std::vector<std::uint32_t> ids;          ///< the whole prompt (non-empty, fits the context)
  std::int64_t max_tokens = 16;
  SamplingSettings sampling;
  std::vector<std::uint32_t> stop_ids;     ///< besides the model's EOS
  /// Set from anywhere to end the run at its next boundary (prefill chunk or token).
  std::atomic<bool>* stop = nullptr;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  /// After each generated token; may set *stop.
  std::function<void(std::uint32_t)> on_token;
};

struct RunResult {
  std::vector<std::uint32_t> generated;
  std::int64_t cached = 0;        ///< prompt tokens not prefilled (resumed from a session state)
  bool stopped_at_eos = false;
  bool timed_out = false;
  bool interrupted = false;       ///< *stop ended it (a stop string, a disconnect, shutdown, a timeout)
  double prefill_seconds = 0;     ///< restoring + prefilling, up to the first token's logits
  double first_token_seconds = 0; ///< from the start of run() to the first token
  double decode_seconds = 0;      ///< after the first token
};

struct EngineStats {
  std::uint64_t snapshot_bytes = 0, snapshots = 0, evictions = 0;
  std::uint64_t live_hits = 0, snapshot_hits = 0, misses = 0;
};

class Engine {
 public:
  Engine(std::unique_ptr<Runtime> runtime, const GenerateSettings& defaults, const ServeOptions& options);

  [[nodiscard]] Runtime& runtime() noexcept { return *runtime_; }
  [[nodiscard]] const chat::ChatTokens& chat_tokens() const noexcept { return chat_; }
  [[nodiscard]] std::int64_t context() const noexcept { return live_.max_positions(); }
  [[nodiscard]] std::uint32_t eos() const noexcept { return defaults_.eos_token; }
  [[nodiscard]] EngineStats stats() const;

  RunResult run(const RunRequest& request);

 private:
  void keep(const Session& session);
  std::unique_ptr<Runtime> runtime_;
  chat::ChatTokens chat_;
  GenerateSettings defaults_;
  ServeOptions options_;
  Session live_;
  PrefixStore<SessionSnapshot> store_;
  EngineStats stats_;
};

}  // namespace k3::serve
