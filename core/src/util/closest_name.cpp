#include <k3/closest_name.hpp>

#include <algorithm>
#include <cctype>
#include <limits>
#include "util/ascii.hpp"

namespace k3 {

namespace {


std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0U : 1U)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string closest_name(std::string_view wanted, const std::vector<std::string>& names) {
  if (std::find(names.begin(), names.end(), wanted) != names.end()) return {};
  const std::string key = util::ascii_lower(wanted);
  std::string best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (const auto& name : names) {
    const std::size_t d = edit_distance(key, util::ascii_lower(name));
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  }
  // Close enough to be a typo: at most a third of the name, and never more than 3 edits.
  const std::size_t limit = std::min<std::size_t>(3, std::max<std::size_t>(1, wanted.size() / 3));
  return best_distance <= limit ? best : std::string();
}

}  // namespace k3
