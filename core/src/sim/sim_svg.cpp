// sim_svg: hit rate against capacity, one polyline per policy, hand-written SVG 1.1.
// Belady is the ceiling: drawn thick and dark, with the region above it shaded as what no
// policy can reach on this trace. The x axis is logarithmic when the capacities span a
// factor of 8 or more, linear from 0 otherwise.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <k3/sim.hpp>

namespace k3 {

namespace {

constexpr double kWidth = 960, kHeight = 600;
constexpr double kLeft = 80, kRight = 250, kTop = 60, kBottom = 90;  // margins
constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;

const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

bool is_belady(const std::string& policy) { return policy.rfind("belady", 0) == 0; }

struct Series {
  std::string policy;
  std::vector<std::pair<double, double>> points;  // (slots, hit rate 0..1), sorted by slots
};

/// The results as one series per policy, points sorted by capacity, Belady last (so it is
/// drawn on top); `caps` gets the distinct capacities simulated, sorted.
std::vector<Series> series_of(const SimReport& rep, std::vector<double>& caps) {
  std::vector<Series> series;
  for (const SimResult& r : rep.results) {
    auto it = std::find_if(series.begin(), series.end(), [&](const Series& s) { return s.policy == r.policy; });
    if (it == series.end()) {
      series.push_back({r.policy, {}});
      it = series.end() - 1;
    }
    it->points.emplace_back(static_cast<double>(r.capacity_slots), r.hit_rate());
    caps.push_back(static_cast<double>(r.capacity_slots));
  }
  for (Series& s : series) std::sort(s.points.begin(), s.points.end());
  std::sort(caps.begin(), caps.end());
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
  std::stable_partition(series.begin(), series.end(), [](const Series& s) { return !is_belady(s.policy); });
  return series;
}

/// Where a (slots, hit rate) point lies in the picture: logarithmic in slots when the
/// capacities span a factor of 8 or more, linear from 0 otherwise.
struct Axes {
  double hi = 2;
  bool log_x = false;
  double xmin = 0, xmax = 1;

  explicit Axes(const std::vector<double>& caps) {
    const double lo = caps.empty() ? 1 : caps.front();
    hi = caps.empty() ? 2 : caps.back();
    log_x = hi / lo >= 8;
    xmin = log_x ? std::log10(lo) - 0.05 * std::log10(hi / lo) : 0.0;
    xmax = log_x ? std::log10(hi) + 0.05 * std::log10(hi / lo) : (hi > 0 ? hi * 1.05 : 1.0);
  }
  [[nodiscard]] double xpix(double slots) const {
    const double v = log_x ? std::log10(slots) : slots;
    return kLeft + (v - xmin) / (xmax - xmin) * kPlotW;
  }
  [[nodiscard]] static double ypix(double rate) { return kTop + (1.0 - rate) * kPlotH; }
};

/// The SVG's opening, its background, the title (the trace's file name) and the trace's
/// figures under it.
void draw_title(std::string& svg, const SimReport& rep) {
  svg += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kWidth) + "\" height=\"" + num(kHeight) +
         "\" viewBox=\"0 0 " + num(kWidth) + " " + num(kHeight) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  const TraceStats& st = rep.stats;
  const std::string base = rep.trace_file.substr(rep.trace_file.find_last_of('/') + 1);
  svg += "<text x=\"" + num(kLeft) +
         "\" y=\"28\" font-size=\"16\" font-weight=\"bold\">Expert-cache hit rate vs capacity: " + escape(base) +
         "</text>\n";
  svg += "<text x=\"" + num(kLeft) + "\" y=\"46\" fill=\"#444\">" + std::to_string(st.requests) + " requests, " +
         std::to_string(st.tokens) + " tokens, " + std::to_string(st.distinct_keys) + " distinct experts, " +
         std::to_string(st.working_set) + " slots per token; 1 slot = " + std::to_string(rep.expert_bytes) +
         " B</text>\n";
}

/// Region above the Belady curve: no online policy can get there.
void draw_unreachable(std::string& svg, const std::vector<Series>& series, const Axes& ax) {
  for (const Series& s : series) {
    if (!is_belady(s.policy) || s.points.empty()) continue;
    std::string pts = num(ax.xpix(s.points.front().first)) + "," + num(Axes::ypix(1.0));
    // Appends rather than `" " + num(...)`: GCC 12 at -O3 reports a false -Wrestrict on
    // operator+(const char*, std::string&&).
    for (const auto& [x, y] : s.points) pts.append(" ").append(num(ax.xpix(x))).append(",").append(num(Axes::ypix(y)));
    pts.append(" ").append(num(ax.xpix(s.points.back().first))).append(",").append(num(Axes::ypix(1.0)));
    svg += "<polygon points=\"" + pts + "\" fill=\"#eeeeee\" stroke=\"none\"/>\n";
    svg += "<text x=\"" + num(ax.xpix(s.points.front().first) + 8) + "\" y=\"" + num(Axes::ypix(1.0) + 16) +
           "\" fill=\"#888\">above belady: unreachable by any policy</text>\n";
  }
}

/// The x axis's ticks: the capacities simulated, thinned so labels do not collide (log
/// scale, or a dozen or fewer), else round steps from 0.
std::vector<double> x_ticks(const Axes& ax, const std::vector<double>& caps) {
  std::vector<double> ticks;
  if (ax.log_x || caps.size() <= 12) {
    double last_px = -1e9;
    for (const double c : caps) {
      if (ax.xpix(c) - last_px < 48) continue;
      ticks.push_back(c);
      last_px = ax.xpix(c);
    }
  } else {
    const double raw = ax.hi / 8;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double step = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
    for (double t = 0; t <= ax.xmax; t += step) ticks.push_back(t);
  }
  return ticks;
}

/// Grid, ticks (slots, and GB below them) and axes with their labels.
void draw_axes(std::string& svg, const Axes& ax, const std::vector<double>& caps, std::uint64_t expert_bytes) {
  for (int i = 0; i <= 10; ++i) {
    const double y = Axes::ypix(i / 10.0);
    svg += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(y) + "\" x2=\"" + num(kLeft + kPlotW) + "\" y2=\"" + num(y) +
           "\" stroke=\"#dddddd\"/>\n";
    svg += "<text x=\"" + num(kLeft - 8) + "\" y=\"" + num(y + 4) + "\" text-anchor=\"end\">" + std::to_string(i * 10) +
           "%</text>\n";
  }
  for (const double t : x_ticks(ax, caps)) {
    const double x = ax.xpix(t);
    svg += "<line x1=\"" + num(x) + "\" y1=\"" + num(kTop) + "\" x2=\"" + num(x) + "\" y2=\"" + num(kTop + kPlotH) +
           "\" stroke=\"#eeeeee\"/>\n";
    svg += "<line x1=\"" + num(x) + "\" y1=\"" + num(kTop + kPlotH) + "\" x2=\"" + num(x) + "\" y2=\"" +
           num(kTop + kPlotH + 6) + "\" stroke=\"black\"/>\n";
    char gb[32];
    std::snprintf(gb, sizeof gb, "%.3g GB", t * static_cast<double>(expert_bytes) / 1e9);
    svg += "<text x=\"" + num(x) + "\" y=\"" + num(kTop + kPlotH + 20) + "\" text-anchor=\"middle\">" +
           std::to_string(static_cast<std::uint64_t>(t)) + "</text>\n";
    svg += "<text x=\"" + num(x) + "\" y=\"" + num(kTop + kPlotH + 34) +
           "\" text-anchor=\"middle\" fill=\"#666\" font-size=\"10\">" + gb + "</text>\n";
  }
  svg += "<rect x=\"" + num(kLeft) + "\" y=\"" + num(kTop) + "\" width=\"" + num(kPlotW) + "\" height=\"" +
         num(kPlotH) + "\" fill=\"none\" stroke=\"black\"/>\n";
  svg += "<text x=\"" + num(kLeft + kPlotW / 2) + "\" y=\"" + num(kHeight - 30) +
         "\" text-anchor=\"middle\">capacity (slots" + std::string(ax.log_x ? ", log scale" : "") +
         "; GB below)</text>\n";
  svg += "<text transform=\"translate(24 " + num(kTop + kPlotH / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">hit rate</text>\n";
}

/// One polyline with its points per policy, Belady thick, dark and dashed, and the legend.
void draw_curves(std::string& svg, const std::vector<Series>& series, const Axes& ax) {
  std::size_t color = 0;
  double legend_y = kTop + 10;
  for (const Series& s : series) {
    const bool ceiling = is_belady(s.policy);
    const std::string stroke = ceiling ? "#000000" : kPalette[color++ % (sizeof kPalette / sizeof kPalette[0])];
    const std::string width = ceiling ? "3" : "2";
    const std::string dash = ceiling ? " stroke-dasharray=\"8 4\"" : "";
    std::string pts;
    for (const auto& [x, y] : s.points)
      pts.append(pts.empty() ? "" : " ").append(num(ax.xpix(x))).append(",").append(num(Axes::ypix(y)));
    svg += "<polyline points=\"" + pts + "\" fill=\"none\" stroke=\"" + stroke + "\" stroke-width=\"" + width + "\"" +
           dash + "/>\n";
    for (const auto& [x, y] : s.points)
      svg += "<circle cx=\"" + num(ax.xpix(x)) + "\" cy=\"" + num(Axes::ypix(y)) + "\" r=\"3\" fill=\"" + stroke +
             "\"/>\n";
    const double lx = kLeft + kPlotW + 20;
    svg += "<line x1=\"" + num(lx) + "\" y1=\"" + num(legend_y) + "\" x2=\"" + num(lx + 28) + "\" y2=\"" +
           num(legend_y) + "\" stroke=\"" + stroke + "\" stroke-width=\"" + width + "\"" + dash + "/>\n";
    svg += "<text x=\"" + num(lx + 36) + "\" y=\"" + num(legend_y + 4) + "\">" + escape(s.policy) +
           (ceiling ? " (optimal ceiling)" : "") + "</text>\n";
    legend_y += 20;
  }
}

}  // namespace

std::string sim_svg(const SimReport& rep) {
  std::vector<double> caps;
  const std::vector<Series> series = series_of(rep, caps);
  const Axes ax(caps);
  std::string svg;
  draw_title(svg, rep);
  draw_unreachable(svg, series, ax);
  draw_axes(svg, ax, caps, rep.expert_bytes);
  draw_curves(svg, series, ax);
  svg += "</svg>\n";
  return svg;
}

}  // namespace k3
