// The server's counters (metrics.hpp) and their Prometheus text (GET /metrics).
#include "serve/metrics.hpp"

#include "serve/metric_text.hpp"

#include <cmath>
#include <cstdio>
#include <string>

namespace k3::serve {

void Metrics::set_loaded(const StreamStats& io, double load_seconds, bool experts_resident) {
  std::lock_guard lock(m_);
  io_ = io;
  load_seconds_ = load_seconds;
  experts_resident_ = experts_resident;
}

void Metrics::record(const RunResult& r, std::size_t prompt_tokens, const StreamStats& io, const EngineStats& engine) {
  std::lock_guard lock(m_);
  ++requests_;
  if (r.interrupted) ++interrupted_;
  if (r.timed_out) ++timeouts_;
  prompt_tokens_ += prompt_tokens;
  cached_tokens_ += static_cast<std::uint64_t>(r.cached);
  prefill_tokens_ += prompt_tokens - static_cast<std::size_t>(r.cached);
  generated_ += r.generated.size();
  prefill_seconds_ += r.prefill_seconds;
  decode_seconds_ += r.decode_seconds;
  if (r.generated.size() > 1) {
    decode_steps_ += static_cast<double>(r.generated.size() - 1);
    last_seconds_per_token_ = r.decode_seconds / static_cast<double>(r.generated.size() - 1);
  }
  last_ttft_ = r.first_token_seconds;
  io_ = io;
  engine_ = engine;
}

void Metrics::count_rejected() {
  std::lock_guard lock(m_);
  ++rejected_;
}

void Metrics::set_queue(std::size_t depth) {
  std::lock_guard lock(m_);
  queue_ = depth;
}

void Metrics::set_running(bool running) {
  std::lock_guard lock(m_);
  running_ = running;
}


std::string Metrics::render(bool loaded) const {
  std::lock_guard lock(m_);
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, const std::string& value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + value +
           "\n";
  };
  auto flag = [](bool b) { return std::string(b ? "1" : "0"); };
  metric("k3_model_loaded", "gauge", "1 once the model is loaded and requests are served", flag(loaded));
  metric("k3_load_seconds", "gauge", "seconds it took to load the model", seconds_text(load_seconds_));
  metric("k3_requests_total", "counter", "generation requests run", count_text(requests_));
  metric("k3_requests_rejected_total", "counter", "requests refused with 429 (queue full)", count_text(rejected_));
  metric("k3_requests_interrupted_total", "counter",
         "generations ended early (stop string, disconnect, shutdown, timeout)", count_text(interrupted_));
  metric("k3_requests_timed_out_total", "counter", "generations ended by the request timeout", count_text(timeouts_));
  metric("k3_queue_depth", "gauge", "requests waiting for the model", count_text(queue_));
  metric("k3_generation_running", "gauge", "1 while a request holds the model", flag(running_));
  metric("k3_prompt_tokens_total", "counter", "prompt tokens of all requests", count_text(prompt_tokens_));
  metric("k3_prefill_tokens_total", "counter", "prompt tokens actually computed (not reused)",
         count_text(prefill_tokens_));
  metric("k3_cached_prompt_tokens_total", "counter", "prompt tokens resumed from a saved session state",
         count_text(cached_tokens_));
  metric("k3_generated_tokens_total", "counter", "tokens generated", count_text(generated_));
  metric("k3_prefill_seconds_total", "counter", "seconds from request start to the first token",
         seconds_text(prefill_seconds_));
  metric("k3_decode_seconds_total", "counter", "seconds generating after the first token",
         seconds_text(decode_seconds_));
  metric("k3_seconds_per_token", "gauge", "decode seconds per token of the last request",
         seconds_text(last_seconds_per_token_));
  metric("k3_time_to_first_token_seconds", "gauge", "time to first token of the last request",
         seconds_text(last_ttft_));
  metric("k3_expert_requests_total", "counter", "routed-expert requests since load", count_text(io_.expert_requests));
  metric("k3_expert_hits_total", "counter", "routed-expert requests found resident", count_text(io_.expert_hits));
  // Every expert resident (the plan holds them all, no cache): every use is a hit, 1. A
  // streaming model before its first request (or no model yet): 0/0, NaN, as Prometheus
  // computes a ratio of nothing.
  const double hit_rate = experts_resident_ ? 1.0
                          : io_.expert_requests
                              ? static_cast<double>(io_.expert_hits) / static_cast<double>(io_.expert_requests)
                              : std::nan("");
  metric("k3_expert_hit_rate", "gauge",
         "true resident hit rate of the expert cache since load (1 when the plan holds every expert, NaN before a "
         "streaming model's first request)",
         ratio_text(hit_rate));
  metric("k3_prefetch_experts_total", "counter", "routed experts read ahead by the router lookahead since load",
         count_text(io_.prefetch_experts));
  metric("k3_prefetch_hits_total", "counter", "routed-expert requests served by an expert read ahead (not hits)",
         count_text(io_.prefetch_hits));
  metric("k3_prefetch_wasted_bytes", "gauge", "bytes read ahead and not requested (yet)",
         count_text(io_.prefetch_wasted_bytes));
  out +=
      "# HELP k3_bytes_read_total bytes read from storage since load, by source\n# TYPE k3_bytes_read_total counter\n";
  char line[256];
  std::snprintf(line, sizeof line,
                "k3_bytes_read_total{source=\"trunk\"} %llu\nk3_bytes_read_total{source=\"experts\"} %llu\n"
                "k3_bytes_read_total{source=\"tables\"} %llu\n",
                static_cast<unsigned long long>(io_.trunk_bytes), static_cast<unsigned long long>(io_.expert_bytes),
                static_cast<unsigned long long>(io_.table_bytes));
  out += line;
  metric("k3_io_wait_seconds_total", "counter", "seconds the compute thread waited for storage",
         seconds_text(io_.io_wait_seconds));
  metric("k3_read_seconds_total", "counter", "seconds inside storage reads, all threads",
         seconds_text(io_.read_seconds));
  metric("k3_expert_failures_total", "counter", "routed-expert reads that failed (output unsound)",
         count_text(io_.expert_failures.size()));
  metric("k3_prefix_snapshots", "gauge", "session snapshots kept for prefix reuse", count_text(engine_.snapshots));
  metric("k3_prefix_snapshot_bytes", "gauge", "bytes held by the snapshots", count_text(engine_.snapshot_bytes));
  metric("k3_prefix_snapshot_evictions_total", "counter", "snapshots dropped to stay within the budget",
         count_text(engine_.evictions));
  out +=
      "# HELP k3_prefix_lookups_total where requests started: live session, snapshot, or fresh\n"
      "# TYPE k3_prefix_lookups_total counter\n";
  std::snprintf(line, sizeof line,
                "k3_prefix_lookups_total{result=\"live\"} %llu\nk3_prefix_lookups_total{result=\"snapshot\"} %llu\n"
                "k3_prefix_lookups_total{result=\"miss\"} %llu\n",
                static_cast<unsigned long long>(engine_.live_hits),
                static_cast<unsigned long long>(engine_.snapshot_hits),
                static_cast<unsigned long long>(engine_.misses));
  out += line;
  return out;
}

}  // namespace k3::serve
