// Number formatting shared by the doctor's findings and its text report (sizes:
// k3::format_bytes, k3/units.hpp).
#pragma once
#include <cstdint>
#include <string>

namespace k3::doctor {

/// `v` with `digits` decimals.
std::string fixed(double v, int digits);

}  // namespace k3::doctor
