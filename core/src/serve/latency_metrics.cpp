// The batch and latency figures of /metrics (latency_metrics.hpp): histograms in the
// Prometheus text format, cumulative buckets as the format wants them.
#include "serve/latency_metrics.hpp"

#include <cstdio>

#include "serve/metric_text.hpp"

namespace k3::serve {

void SecondsHistogram::observe(double seconds) noexcept {
  ++count_;
  sum_ += seconds;
  for (std::size_t i = 0; i < kBounds.size(); ++i)
    if (seconds <= kBounds[i]) {
      ++counts_[i];
      return;
    }
}

void SecondsHistogram::render(std::string& out, const char* name, const char* help) const {
  char line[256];
  std::snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
  out += line;
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < kBounds.size(); ++i) {
    cumulative += counts_[i];
    std::snprintf(line, sizeof line, "%s_bucket{le=\"%g\"} %llu\n", name, kBounds[i],
                  static_cast<unsigned long long>(cumulative));
    out += line;
  }
  std::snprintf(line, sizeof line, "%s_bucket{le=\"+Inf\"} %llu\n", name, static_cast<unsigned long long>(count_));
  out += line;
  out += std::string(name) + "_sum " + seconds_text(sum_) + "\n" + name + "_count " + count_text(count_) + "\n";
}

void LatencyMetrics::observe_queue_wait(double seconds) {
  std::lock_guard lock(m_);
  queue_wait_.observe(seconds);
}

void LatencyMetrics::observe_request(const RunResult& r) {
  std::lock_guard lock(m_);
  if (!r.generated.empty()) first_token_.observe(r.first_token_seconds);
  for (const double gap : r.token_gaps) token_gap_.observe(gap);
}

std::string LatencyMetrics::render(const EngineStats& engine) const {
  std::string out;
  {
    std::lock_guard lock(m_);
    queue_wait_.render(out, "k3_queue_wait_seconds", "seconds requests waited for a sequence slot");
    first_token_.render(out, "k3_request_first_token_seconds",
                        "time to first token of each request (from the moment it got a slot)");
    token_gap_.render(out, "k3_inter_token_seconds", "seconds between consecutive tokens handed to a request");
  }
  char line[512];
  auto metric = [&](const char* name, const char* type, const char* help, std::uint64_t value) {
    std::snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s %s\n", name, help, name, type, name,
                  count_text(value).c_str());
    out += line;
  };
  const auto d = [](auto v) { return static_cast<std::uint64_t>(v); };
  metric("k3_sequences_parallel", "gauge", "sequence slots: requests decoded together at most (serve.parallel)",
         d(engine.parallel));
  metric("k3_sequences_active", "gauge", "requests being decoded now", d(engine.active));
  metric("k3_steps_total", "counter", "engine steps (one forward pass over every active sequence each)",
         d(engine.steps.steps));
  metric("k3_step_tokens_total", "counter", "tokens fed by the steps (prompt chunks, tokens and drafts)",
         d(engine.steps.rows));
  out += "# HELP k3_batch_size sequences decoded together per engine step\n# TYPE k3_batch_size histogram\n";
  std::uint64_t cumulative = 0;
  for (std::size_t n = 1; n < engine.steps.by_size.size(); ++n) {
    cumulative += engine.steps.by_size[n];
    std::snprintf(line, sizeof line, "k3_batch_size_bucket{le=\"%zu\"} %llu\n", n,
                  static_cast<unsigned long long>(cumulative));
    out += line;
  }
  std::snprintf(line, sizeof line,
                "k3_batch_size_bucket{le=\"+Inf\"} %llu\nk3_batch_size_sum %llu\nk3_batch_size_count %llu\n",
                static_cast<unsigned long long>(engine.steps.steps),
                static_cast<unsigned long long>(engine.steps.sequences),
                static_cast<unsigned long long>(engine.steps.steps));
  out += line;
  return out;
}

}  // namespace k3::serve
