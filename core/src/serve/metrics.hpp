// The server's counters and their Prometheus text form (GET /metrics, docs/serve.md).
// Thread-safe: requests record, /metrics renders, from any thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include <k3/model.hpp>

#include "serve/engine.hpp"

namespace k3::serve {

class Metrics {
 public:
  /// `experts_resident`: the plan holds every expert (no expert cache), so k3_expert_hit_rate is 1.
  void set_loaded(const StreamStats& io, double load_seconds, bool experts_resident);
  void record(const RunResult& r, std::size_t prompt_tokens, const StreamStats& io, const EngineStats& engine);
  void count_rejected();
  void set_queue(std::size_t depth);
  void set_running(bool running);
  [[nodiscard]] std::string render(bool loaded) const;

 private:
  mutable std::mutex m_;
  std::uint64_t requests_ = 0, rejected_ = 0, interrupted_ = 0, timeouts_ = 0;
  std::uint64_t prompt_tokens_ = 0, prefill_tokens_ = 0, cached_tokens_ = 0, generated_ = 0;
  double prefill_seconds_ = 0, decode_seconds_ = 0, decode_steps_ = 0;
  double last_seconds_per_token_ = 0, last_ttft_ = 0, load_seconds_ = 0;
  std::size_t queue_ = 0;
  bool running_ = false;
  bool experts_resident_ = false;
  StreamStats io_;
  EngineStats engine_;
};

}  // namespace k3::serve
