// cluster.layers: which layers each rank of a model split over ranks holds (k3/cluster.hpp).
#include <k3/cluster.hpp>

#include <charconv>
#include <cmath>
#include <numeric>
#include <string>
#include <string_view>

#include <k3/error.hpp>
#include <k3/plan.hpp>

namespace k3 {
namespace {

/// "0-3,4-9,10-11": one inclusive range per rank, in order.
std::vector<LayerRange> explicit_ranges(const Pipeline& p, std::string_view text, std::size_t layers, int ranks) {
  std::vector<LayerRange> out;
  std::size_t next = 0;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    const std::size_t dash = item.find('-');
    std::size_t a = 0, b = 0;
    const auto number = [](std::string_view s, std::size_t& v) {
      const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
      return !s.empty() && r.ec == std::errc{} && r.ptr == s.data() + s.size();
    };
    if (dash == std::string_view::npos ? !(number(item, a) && number(item, b))
                                       : !(number(item.substr(0, dash), a) && number(item.substr(dash + 1), b)))
      p.refuse("cluster.layers", "'" + std::string(item) + "' is not a range of layers like 4-9 (or auto)");
    if (a != next)
      p.refuse("cluster.layers", "range " + std::to_string(out.size() + 1) + " starts at layer " + std::to_string(a) +
                                     " where layer " + std::to_string(next) +
                                     " is next: the ranges cover every layer "
                                     "once, in order");
    if (b < a || b >= layers)
      p.refuse("cluster.layers",
               "'" + std::string(item) + "' is not within the model's layers 0-" + std::to_string(layers - 1));
    out.push_back({a, b + 1});
    next = b + 1;
  }
  if (next != layers)
    p.refuse("cluster.layers", "the ranges end at layer " + std::to_string(next == 0 ? 0 : next - 1) +
                                   "; the model has layers 0-" + std::to_string(layers - 1));
  if (out.size() != static_cast<std::size_t>(ranks))
    p.refuse("cluster.layers", std::to_string(out.size()) + " ranges for a job of " + std::to_string(ranks) +
                                   " ranks: one range per rank");
  return out;
}

/// Contiguous ranges with about the same bytes each: a layer weighs its trunk tensors and
/// its routed experts as the plan holds them.
std::vector<LayerRange> balanced_ranges(const ModelConfig& c, std::size_t layers, int ranks) {
  PlanInputs in;
  in.trunk_gb = 0;
  in.expert_cache_gb = 0;
  in.available = 1;  // sizes only: nothing is measured
  const MemoryPlan plan = plan_memory(c, in);
  std::vector<double> weight(layers);
  for (std::size_t li = 0; li < layers; ++li)
    weight[li] = static_cast<double>(plan.layer_bytes[li]) +
                 (c.is_dense(static_cast<std::int64_t>(li))
                      ? 0.0
                      : static_cast<double>(c.num_experts) * static_cast<double>(plan.expert_slot_bytes));
  const double total = std::accumulate(weight.begin(), weight.end(), 0.0);
  const auto n = static_cast<std::size_t>(ranks);
  std::vector<LayerRange> out;
  std::size_t first = 0;
  double before = 0;  // the weight of layers [0, first)
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t left = n - r - 1;  // ranks after this one, each needing a layer
    if (left == 0) {
      out.push_back({first, layers});
      break;
    }
    const double target = total * static_cast<double>(r + 1) / static_cast<double>(n);
    std::size_t last = first + 1;
    double sum = before + weight[first];
    // Take the next layer while that brings the cut nearer the target and leaves a layer for
    // every later rank.
    while (last + left < layers && std::abs(sum + weight[last] - target) < std::abs(sum - target)) {
      sum += weight[last];
      ++last;
    }
    out.push_back({first, last});
    first = last;
    before = sum;
  }
  return out;
}

}  // namespace

std::vector<LayerRange> cluster_layer_ranges(const Pipeline& p, const ModelConfig& config, int ranks) {
  const auto layers = static_cast<std::size_t>(config.num_hidden_layers);
  if (ranks < 1) throw RuntimeError("a cluster of no ranks");
  if (static_cast<std::size_t>(ranks) > layers)
    p.refuse("cluster.transport", "a job of " + std::to_string(ranks) + " ranks for a model of " +
                                      std::to_string(layers) + " layers: every rank holds at least one layer");
  const std::string spec = p.get_string("cluster.layers");
  if (spec == "auto") return balanced_ranges(config, layers, ranks);
  return explicit_ranges(p, spec, layers, ranks);
}

}  // namespace k3
