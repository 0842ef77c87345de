// Whether this test binary is built with AddressSanitizer (K3_SANITIZE=ON). ASan's shadow
// memory, redzones and freed-memory quarantine inflate the resident set far beyond what the
// program itself holds, so a peak-RSS bound means nothing in such a build.
#pragma once

namespace k3::test {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool under_asan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool under_asan = true;
#else
inline constexpr bool under_asan = false;
#endif
#else
inline constexpr bool under_asan = false;
#endif

}  // namespace k3::test
