// The metrics a bench prints, derived from a sample's raw counts (k3/bench.hpp), and their
// mean and standard deviation.
#include <cmath>
#include <limits>

#include <k3/bench.hpp>

namespace k3 {
namespace {

constexpr double nan_value = std::numeric_limits<double>::quiet_NaN();

double per(double value, double count) { return count > 0 ? value / count : nan_value; }

constexpr BenchMetricInfo metric_table[bench_metric_count] = {
    {"prefill_tokens_per_second", "prefill tokens/s", false},
    {"decode_tokens_per_second", "decode tokens/s", false},
    {"seconds_per_token", "s/token", false},
    {"io_wait_per_token", "I/O wait/token", false},
    {"expert_io_wait_per_token", "expert I/O wait/token", false},
    {"hit_rate", "expert-cache hit rate", false},
    {"prefetch_hit_rate", "prefetch hit rate", false},
    {"expert_bytes_per_token", "experts read/token", true},
    {"trunk_bytes_per_token", "trunk read/token", true},
    {"table_bytes_per_token", "tables read/token", true},
    {"peak_rss_bytes", "peak RSS", true},
};

}  // namespace

const BenchMetricInfo& bench_metric_info(BenchMetric m) { return metric_table[static_cast<int>(m)]; }

double bench_metric(const BenchSample& s, BenchMetric m) {
  const auto forwards = static_cast<double>(s.decode.forwards);
  switch (m) {
    case BenchMetric::prefill_tokens_per_second: return per(static_cast<double>(s.prompt_tokens), s.prefill_seconds);
    case BenchMetric::decode_tokens_per_second: return per(forwards, s.decode.seconds);
    case BenchMetric::seconds_per_token: return per(s.decode.seconds, forwards);
    case BenchMetric::io_wait_per_token: return per(s.decode_io.io_wait_seconds, forwards);
    case BenchMetric::expert_io_wait_per_token: return per(s.decode_io.expert_wait_seconds, forwards);
    case BenchMetric::hit_rate:
      // A resident model asks no cache for experts: there is no rate, not a rate of 0.
      return per(static_cast<double>(s.decode_io.expert_hits), static_cast<double>(s.decode_io.expert_requests));
    case BenchMetric::prefetch_hit_rate:
      return per(static_cast<double>(s.decode_io.prefetch_hits), static_cast<double>(s.decode_io.expert_requests));
    case BenchMetric::expert_bytes_per_token: return per(static_cast<double>(s.decode_io.expert_bytes), forwards);
    case BenchMetric::trunk_bytes_per_token: return per(static_cast<double>(s.decode_io.trunk_bytes), forwards);
    case BenchMetric::table_bytes_per_token: return per(static_cast<double>(s.decode_io.table_bytes), forwards);
    case BenchMetric::peak_rss_bytes: return static_cast<double>(s.peak_rss);
  }
  return nan_value;
}

MeanSd mean_sd(const std::vector<double>& values) {
  // About the first value, so that equal values give their value and an sd of exactly 0
  // (their plain sum ÷ n can be off by an ulp, and the sd then 1e-13 instead of 0).
  MeanSd out;
  double first = nan_value, offsets = 0;
  for (const double v : values)
    if (!std::isnan(v)) {
      if (out.n == 0) first = v;
      offsets += v - first;
      ++out.n;
    }
  if (out.n == 0) {
    out.mean = out.sd = nan_value;
    return out;
  }
  out.mean = first + offsets / static_cast<double>(out.n);
  if (out.n < 2) return out;
  double squares = 0;
  for (const double v : values)
    if (!std::isnan(v)) squares += (v - out.mean) * (v - out.mean);
  out.sd = std::sqrt(squares / static_cast<double>(out.n - 1));
  return out;
}

}  // namespace k3
