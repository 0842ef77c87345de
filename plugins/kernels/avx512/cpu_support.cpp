// Can this CPU run the avx512 set? Built with baseline flags: the shared check executes
// CPUID and XGETBV only.
#include "../common/simd_sets.hpp"
#include "../common/x86_cpu_features.hpp"

namespace k3::kernels::avx512 {

bool cpu_supported() noexcept { return x86::has_avx512f_bw(); }

}  // namespace k3::kernels::avx512
