// human() and fixed() (report_format.hpp).
#include "doctor/report_format.hpp"

#include <cstdio>

namespace k3::doctor {

std::string human(std::uint64_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (bytes >= 1'000'000'000'000ull)
    std::snprintf(buf, sizeof buf, "%.2f TB", b / 1e12);
  else if (bytes >= 1'000'000'000ull)
    std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  else if (bytes >= 1'000'000ull)
    std::snprintf(buf, sizeof buf, "%.1f MB", b / 1e6);
  else if (bytes >= 1'000ull)
    std::snprintf(buf, sizeof buf, "%.1f kB", b / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  return buf;
}

std::string fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace k3::doctor
