// The server's latency and batching figures (GET /metrics, docs/serve.md "Metrics"): how long
// requests waited for a sequence slot, their time to first token, the time between their
// tokens, and how many sequences each engine step decoded together. Prometheus histograms;
// thread-safe (the queue's workers, the engine's scheduler and /metrics use it at once).
#pragma once
#include <array>
#include <cstdint>
#include <mutex>
#include <string>

#include "serve/engine.hpp"

namespace k3::serve {

/// A Prometheus histogram of seconds over fixed bucket bounds.
class SecondsHistogram {
 public:
  static constexpr std::array<double, 14> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                     0.25,  0.5,    1,     2.5,  5,     10,   30};
  void observe(double seconds) noexcept;
  /// `name` as a histogram with its HELP line.
  void render(std::string& out, const char* name, const char* help) const;

 private:
  std::array<std::uint64_t, kBounds.size()> counts_{};  ///< per bucket (not cumulative)
  std::uint64_t count_ = 0;
  double sum_ = 0;
};

class LatencyMetrics {
 public:
  void observe_queue_wait(double seconds);
  /// After a request: its time to first token and the gaps between its tokens.
  void observe_request(const RunResult& r);
  /// The histograms, then the engine's slots and step figures.
  [[nodiscard]] std::string render(const EngineStats& engine) const;

 private:
  mutable std::mutex m_;
  SecondsHistogram queue_wait_, first_token_, token_gap_;
};

}  // namespace k3::serve
