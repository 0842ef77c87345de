// Can this CPU run the avx2 set? Built with baseline flags: the shared check executes CPUID
// and XGETBV only.
#include "../common/simd_sets.hpp"
#include "../common/x86_cpu_features.hpp"

namespace k3::kernels::avx2 {

bool cpu_supported() noexcept { return x86::has_avx2_fma(); }

}  // namespace k3::kernels::avx2
