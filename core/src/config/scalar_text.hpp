// Strict scalar parsing for pipeline values: the whole text must be the value, so "12x",
// "1.5" (as an integer) or "nan" are refused rather than half-read.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace k3::config {

std::optional<std::int64_t> parse_int(std::string_view text);
/// A finite number; integers and exponents accepted, a leading '+' allowed.
std::optional<double> parse_number(std::string_view text);
/// true/false, yes/no, on/off in any case.
std::optional<bool> parse_bool(std::string_view text);
/// Shortest text that reads back as exactly `v`.
std::string format_number(double v);

}  // namespace k3::config
