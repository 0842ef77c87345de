// What this libk3core is: `k3host --version` and the run report print it, so a measurement
// names the build it came from.
#pragma once
#include <string>

namespace k3 {

struct BuildInfo {
  std::string version;     ///< the project version, "0.1.0"
  std::string commit;      ///< `git describe` of the source at build time ("…-modified" with local changes)
  std::string compiler;    ///< "GCC 12.2.0"
  std::string build_type;  ///< CMAKE_BUILD_TYPE, "RelWithDebInfo"
};

const BuildInfo& build_info();

}  // namespace k3
