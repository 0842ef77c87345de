// Capacities as users write them: slots, decimal GB of expert bytes, or multiples of one
// token's working set.
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

#include <k3/error.hpp>
#include <k3/sim.hpp>

namespace k3 {

namespace {
bool ends_with_nocase(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  for (std::size_t i = 0; i < suffix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[s.size() - suffix.size() + i])) != suffix[i]) return false;
  return true;
}
}  // namespace

CapacitySpec parse_capacity(std::string_view text) {
  CapacitySpec spec;
  spec.text = std::string(text);
  std::string_view number = text;
  if (ends_with_nocase(text, "gb")) {
    spec.unit = CapacitySpec::Unit::gigabytes;
    number.remove_suffix(2);
  } else if (ends_with_nocase(text, "x")) {
    spec.unit = CapacitySpec::Unit::working_sets;
    number.remove_suffix(1);
  }
  const std::string n(number);
  const char* first = n.c_str();
  char* end = nullptr;
  const double v = n.empty() || std::isspace(static_cast<unsigned char>(n[0])) ? NAN : std::strtod(first, &end);
  const bool whole = end != nullptr && *end == '\0';
  if (!whole || !std::isfinite(v) || v <= 0 ||
      (spec.unit == CapacitySpec::Unit::slots &&
       (v != std::floor(v) || n.find_first_not_of("0123456789") != std::string::npos)))
    throw UsageError("capacity '" + spec.text +
                     "': expected a whole number of slots (3647), decimal gigabytes (64GB) or multiples of one "
                     "token's working set (2x)");
  spec.value = v;
  return spec;
}

std::uint64_t capacity_slots(const CapacitySpec& spec, std::uint64_t expert_bytes, std::uint64_t working_set) {
  double slots = 0;
  switch (spec.unit) {
    case CapacitySpec::Unit::slots: slots = spec.value; break;
    case CapacitySpec::Unit::gigabytes:
      if (expert_bytes == 0) throw UsageError("capacity '" + spec.text + "': the expert size is unknown");
      slots = std::floor(spec.value * 1e9 / static_cast<double>(expert_bytes));
      break;
    case CapacitySpec::Unit::working_sets: slots = std::floor(spec.value * static_cast<double>(working_set)); break;
  }
  if (slots < 1)
    throw UsageError("capacity '" + spec.text + "' is less than one slot (expert " + std::to_string(expert_bytes) +
                     " bytes, working set " + std::to_string(working_set) + " slots)");
  if (slots > 1e12) throw UsageError("capacity '" + spec.text + "' is too large");
  return static_cast<std::uint64_t>(slots);
}

}  // namespace k3
