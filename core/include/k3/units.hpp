// Bytes for people. One unit system everywhere k3host prints a size: decimal SI units
// (kB = 1e3, MB = 1e6, GB = 1e9, TB = 1e12 bytes), the same GB the pipeline's *_gb keys take.
#pragma once
#include <cstdint>
#include <string>

namespace k3 {

/// "512 B", "4.1 kB", "12.3 MB", "1.23 GB", "1.56 TB".
std::string format_bytes(std::uint64_t bytes);

}  // namespace k3
