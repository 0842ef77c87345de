// Number formatting shared by the doctor's findings and its text report: decimal units,
// like the memory plan and the budgets (GB of 1e9 bytes).
#pragma once
#include <cstdint>
#include <string>

namespace k3::doctor {

/// "12.3 MB", "4.56 GB", "512 B".
std::string human(std::uint64_t bytes);
/// `v` with `digits` decimals.
std::string fixed(double v, int digits);

}  // namespace k3::doctor
