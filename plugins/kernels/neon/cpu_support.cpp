// Can this CPU run the neon set? Linux reports Advanced SIMD in the auxiliary vector.
#include <sys/auxv.h>

#include "../common/simd_sets.hpp"

#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif

namespace k3::kernels::neon {

bool cpu_supported() noexcept { return (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0; }

}  // namespace k3::kernels::neon
