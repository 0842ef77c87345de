// Values as Prometheus text, rounded to what they mean (the format takes any float text):
// counts as integers, seconds to the microsecond, ratios to 6 significant digits. Every
// figure of /metrics goes through these (metrics.cpp, latency_metrics.cpp).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace k3::serve {

inline std::string count_text(std::uint64_t v) { return std::to_string(v); }

inline std::string seconds_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s == "-0" ? "0" : s;
}

inline std::string ratio_text(double v) {
  if (std::isnan(v)) return "NaN";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace k3::serve
