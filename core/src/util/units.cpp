#include <k3/units.hpp>

#include <cstdio>

namespace k3 {

std::string format_bytes(std::uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  char buf[32];
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

}  // namespace k3
