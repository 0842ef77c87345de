// A bench's result as a table for people, as CSV and as JSON (k3/bench.hpp). All three
// carry the same numbers: per run, then mean ± sd per pipeline, then each pipeline's mean
// over the first's (B/A).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <k3/bench.hpp>

#include "bench/bench_wire.hpp"

namespace k3 {
namespace {

constexpr BenchMetric metric_at(int i) { return static_cast<BenchMetric>(i); }

std::vector<double> values_of(const BenchPipelineResult& p, BenchMetric m) {
  std::vector<double> v;
  for (const auto& s : p.samples) v.push_back(bench_metric(s, m));
  return v;
}

/// The mean of `p` over the mean of `base`; NaN when either is missing or the base is 0.
double ratio(const BenchPipelineResult& p, const BenchPipelineResult& base, BenchMetric m) {
  const double a = mean_sd(values_of(base, m)).mean, b = mean_sd(values_of(p, m)).mean;
  if (std::isnan(a) || std::isnan(b) || a == 0) return std::nan("");
  return b / a;
}

/// True when every repetition generated the same ids (the exactness contract; vacuous for none).
bool ids_identical(const BenchPipelineResult& p) {
  for (const auto& s : p.samples)
    if (s.generated != p.samples.front().generated) return false;
  return true;
}

std::string printf_string(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

/// Shortest text that reads back as the same double (CSV); empty for NaN.
std::string exact(double v) {
  if (std::isnan(v)) return "";
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : "";
}

// ---- the table -------------------------------------------------------------------------

/// The decimals that give `v` `digits` significant digits (none from 10^digits on, at most 15).
int decimals_for(double v, int digits) {
  const double a = std::fabs(v);
  if (a == 0 || std::isnan(a)) return 0;
  return std::clamp(digits - 1 - static_cast<int>(std::floor(std::log10(a))), 0, 15);
}

std::string with_decimals(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

/// 4 significant digits (whole numbers from 1000 on), never with an exponent: 0.0001208,
/// never 1.208e-04.
std::string number(double v) {
  if (std::isnan(v)) return "n/a";
  if (v == 0) return "0";
  return with_decimals(v, decimals_for(v, 4));
}

/// An sd beside a mean printed with `mean_decimals`: two significant digits, never more
/// decimals than the mean has, and "0" when that rounds to zero (equal repetitions, or a
/// spread below the mean's last digit): 852.2 ± 0 kB, never ± 0.000000000000143.
std::string spread(double sd, int mean_decimals) {
  if (std::isnan(sd)) return "n/a";
  const int decimals = std::min(mean_decimals, decimals_for(sd, 2));
  if (decimals == 0 && sd >= 100) {  // whole: two significant digits too (1234 -> 1200)
    const double unit = std::pow(10.0, std::floor(std::log10(sd)) - 1);
    sd = std::round(sd / unit) * unit;
  }
  const std::string text = with_decimals(sd, decimals);
  return text.find_first_of("123456789") == std::string::npos ? "0" : text;
}

/// The decimal unit that suits `bytes`, and its size (k3/units.hpp: one unit system everywhere).
std::pair<const char*, double> byte_unit(double bytes) {
  if (bytes >= 1e9) return {"GB", 1e9};
  if (bytes >= 1e6) return {"MB", 1e6};
  if (bytes >= 1e3) return {"kB", 1e3};
  return {"B", 1.0};
}

/// `v` in `unit` (of `size` bytes): whole bytes below 1 kB.
std::string in_unit(double v, double size) { return size == 1.0 ? printf_string("%.0f", v) : number(v / size); }

/// The decimals in_unit() gives `v`.
int unit_decimals(double v, double size) { return size == 1.0 || v == 0 ? 0 : decimals_for(v / size, 4); }

std::string bytes_text(double bytes) {
  if (std::isnan(bytes)) return "n/a";
  const auto [unit, size] = byte_unit(bytes);
  return in_unit(bytes, size) + " " + unit;
}

std::string cell(BenchMetric m, double v) {
  if (bench_metric_is_rate(m)) return std::isnan(v) ? "n/a" : printf_string("%.1f%%", 100.0 * v);
  return bench_metric_info(m).bytes ? bytes_text(v) : number(v);
}

std::string mean_sd_cell(BenchMetric m, const MeanSd& ms) {
  if (std::isnan(ms.mean)) return "n/a";
  if (bench_metric_is_rate(m)) return printf_string("%.1f", 100.0 * ms.mean) + " ± " + spread(100.0 * ms.sd, 1) + "%";
  if (bench_metric_info(m).bytes) {
    const auto [unit, size] = byte_unit(ms.mean);
    return in_unit(ms.mean, size) + " ± " + spread(ms.sd / size, unit_decimals(ms.mean, size)) + " " + unit;
  }
  return number(ms.mean) + " ± " + spread(ms.sd, ms.mean == 0 ? 0 : decimals_for(ms.mean, 4));
}

/// Columns padded to their widest cell; the first `left` columns left-aligned, the rest right.
std::string columns(const std::vector<std::vector<std::string>>& rows, std::size_t left) {
  std::vector<std::size_t> width;
  auto length = [](const std::string& s) {  // characters, not bytes ("±")
    std::size_t n = 0;
    for (const unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  };
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], length(r[c]));
    }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t c = 0; c < r.size(); ++c) {
      const std::string pad(width[c] - length(r[c]), ' ');
      line += (c == 0 ? "" : "  ") + (c < left ? r[c] + pad : pad + r[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string describe(const BenchPipelineResult& p) {
  const BenchInfo& i = p.info;
  std::ostringstream o;
  o << p.label << ": " << p.config << " — "
    << (i.streaming ? "streaming, cache " + i.cache_policy : std::string("resident")) << ", kernels " << i.kernels
    << ", " << i.threads << " thread" << (i.threads == 1 ? "" : "s") << ", plan "
    << bytes_text(static_cast<double>(i.plan_bytes)) << ", loaded in " << number(i.load_seconds) << " s\n   prompt "
    << i.prompt_ids.size() << " tokens, " << i.new_tokens << " new tokens per repetition (" << i.new_tokens - 1
    << " decode forward passes), warm-up " << i.warmup_tokens << " tokens";
  if (i.streams > 1)
    o << "; " << i.streams << " streams decoded together (seeds job.sampling.seed + 0 … " << i.streams - 1
      << "): decode figures are theirs together";
  if (!p.samples.empty())
    o << "; generated ids " << (ids_identical(p) ? "identical in all " : "DIFFER between the ") << p.samples.size()
      << " repetitions";
  o << "\n";
  return o.str();
}

// ---- CSV -------------------------------------------------------------------------------

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

std::string bench_table(const BenchResult& r) {
  std::ostringstream o;
  const std::size_t n = r.pipelines.size();
  o << "k3host bench: " << n << " pipeline" << (n == 1 ? "" : "s") << ", " << r.repetitions << " repetition"
    << (r.repetitions == 1 ? "" : "s") << " each" << (n > 1 ? ", interleaved" : "")
    << (r.reload ? "; every repetition in a freshly loaded process with its own warm-up"
                 : "; each pipeline loaded once in its own process, its expert cache kept between repetitions")
    << (r.interrupted ? "; INTERRUPTED, " + std::to_string(r.order.size()) + " runs done" : std::string()) << "\n";
  for (const auto& p : r.pipelines) o << describe(p);
  o << "\n";

  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head{"run", "pipeline"};
  for (int m = 0; m < bench_metric_count; ++m) head.push_back(bench_metric_info(metric_at(m)).label);
  rows.push_back(head);
  for (std::size_t k = 0; k < r.order.size(); ++k) {
    const auto& [pi, rep] = r.order[k];
    const BenchPipelineResult& p = r.pipelines[pi];
    std::vector<std::string> row{std::to_string(k + 1), p.label + std::to_string(rep + 1)};
    for (int m = 0; m < bench_metric_count; ++m)
      row.push_back(cell(metric_at(m), bench_metric(p.samples[rep], metric_at(m))));
    rows.push_back(row);
  }
  o << columns(rows, 2) << "\n";

  rows.clear();
  head = {"mean ± sd"};
  for (const auto& p : r.pipelines) head.push_back(p.label + " (" + std::to_string(p.samples.size()) + ")");
  for (std::size_t i = 1; i < n; ++i) head.push_back(r.pipelines[i].label + "/" + r.pipelines[0].label);
  rows.push_back(head);
  for (int mi = 0; mi < bench_metric_count; ++mi) {
    const BenchMetric m = metric_at(mi);
    std::vector<std::string> row{bench_metric_info(m).label};
    for (const auto& p : r.pipelines) row.push_back(mean_sd_cell(m, mean_sd(values_of(p, m))));
    for (std::size_t i = 1; i < n; ++i) {
      const double q = ratio(r.pipelines[i], r.pipelines[0], m);
      row.push_back(std::isnan(q) ? "n/a" : printf_string("%.3f", q));
    }
    rows.push_back(row);
  }
  o << columns(rows, 1);
  return o.str();
}

std::string bench_csv(const BenchResult& r) {
  std::ostringstream o;
  o << "row,run,pipeline,config,repetition";
  for (int m = 0; m < bench_metric_count; ++m) o << "," << bench_metric_info(metric_at(m)).key;
  o << "\n";
  auto metrics = [&](const auto& value_of) {
    for (int m = 0; m < bench_metric_count; ++m) o << "," << exact(value_of(metric_at(m)));
    o << "\n";
  };
  for (std::size_t k = 0; k < r.order.size(); ++k) {
    const auto& [pi, rep] = r.order[k];
    const BenchPipelineResult& p = r.pipelines[pi];
    o << "run," << k + 1 << "," << p.label << "," << csv_field(p.config) << "," << rep + 1;
    const auto& sample = p.samples[rep];  // clang 14 cannot capture a structured binding
    metrics([&](BenchMetric m) { return bench_metric(sample, m); });
  }
  for (const auto& p : r.pipelines) {
    o << "mean,," << p.label << "," << csv_field(p.config) << ",";
    metrics([&](BenchMetric m) { return mean_sd(values_of(p, m)).mean; });
    o << "sd,," << p.label << "," << csv_field(p.config) << ",";
    metrics([&](BenchMetric m) { return mean_sd(values_of(p, m)).sd; });
  }
  for (std::size_t i = 1; i < r.pipelines.size(); ++i) {
    o << "ratio,," << r.pipelines[i].label << "/" << r.pipelines[0].label << ",,";
    metrics([&](BenchMetric m) { return ratio(r.pipelines[i], r.pipelines[0], m); });
  }
  return o.str();
}

std::string bench_json(const BenchResult& r) {
  using nlohmann::json;
  // NaN (a metric that does not apply) is written as null.
  auto num = [](double v) { return std::isnan(v) ? json(nullptr) : json(v); };
  json j;
  j["repetitions"] = r.repetitions;
  j["reload"] = r.reload;
  j["interrupted"] = r.interrupted;
  json metrics = json::array();
  for (int m = 0; m < bench_metric_count; ++m) {
    const BenchMetricInfo& info = bench_metric_info(metric_at(m));
    metrics.push_back({{"key", info.key}, {"label", info.label}, {"bytes", info.bytes}});
  }
  j["metrics"] = metrics;
  json order = json::array();
  for (const auto& [pi, rep] : r.order) order.push_back({{"pipeline", r.pipelines[pi].label}, {"repetition", rep + 1}});
  j["order"] = order;
  json pipelines = json::array();
  for (const auto& p : r.pipelines) {
    json samples = json::array();
    for (std::size_t k = 0; k < p.samples.size(); ++k) {
      json s = p.samples[k];
      s["repetition"] = k + 1;
      for (int m = 0; m < bench_metric_count; ++m)
        s["metrics"][bench_metric_info(metric_at(m)).key] = num(bench_metric(p.samples[k], metric_at(m)));
      samples.push_back(s);
    }
    json summary;
    for (int m = 0; m < bench_metric_count; ++m) {
      const MeanSd ms = mean_sd(values_of(p, metric_at(m)));
      summary[bench_metric_info(metric_at(m)).key] = {{"mean", num(ms.mean)}, {"sd", num(ms.sd)}, {"n", ms.n}};
    }
    pipelines.push_back({{"label", p.label},
                         {"config", p.config},
                         {"info", p.info},
                         {"samples", samples},
                         {"summary", summary},
                         {"generated_ids_identical", ids_identical(p)}});
  }
  j["pipelines"] = pipelines;
  json ratios = json::object();
  for (std::size_t i = 1; i < r.pipelines.size(); ++i) {
    json q;
    for (int m = 0; m < bench_metric_count; ++m)
      q[bench_metric_info(metric_at(m)).key] = num(ratio(r.pipelines[i], r.pipelines[0], metric_at(m)));
    ratios[r.pipelines[i].label + "/" + r.pipelines[0].label] = q;
  }
  j["ratios"] = ratios;
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace k3
