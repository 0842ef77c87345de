#include <k3/build_info.hpp>

#include "k3_build_commit.hpp"  // generated at every build (core/cmake/write_build_commit.cmake)

namespace k3 {

namespace {

std::string compiler() {
#if defined(__clang__)
  return "Clang " __clang_version__;
#elif defined(__GNUC__)
  return "GCC " __VERSION__;
#else
  return "unknown compiler";
#endif
}

}  // namespace

const BuildInfo& build_info() {
  static const BuildInfo info{K3_VERSION, K3_BUILD_COMMIT, compiler(), K3_BUILD_TYPE};
  return info;
}

}  // namespace k3
