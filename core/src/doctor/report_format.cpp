// fixed() (report_format.hpp).
#include "doctor/report_format.hpp"

#include <cstdio>

namespace k3::doctor {

std::string fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace k3::doctor
