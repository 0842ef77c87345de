// probe_cpu(): the architecture, the model name and the ISA extensions the kernel sets care
// about. On x86-64 the compiler's CPU check (CPUID, and XGETBV for whether the OS saves the
// ymm/zmm state) answers, the same pair the avx2 and avx512 sets' score() test; on AArch64
// the auxiliary vector (the neon set's test).
#include <sys/utsname.h>

#include <fstream>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include <k3/machine.hpp>

namespace k3::machine {

namespace fs = std::filesystem;

namespace {

std::string model_name(const fs::path& root) {
  std::ifstream in(root / "proc/cpuinfo");
  std::string line;
  std::string fallback;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    std::string value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    if (key == "model name") return value;
    if (fallback.empty() && (key == "Hardware" || key == "Processor" || key == "uarch")) fallback = value;
  }
  return fallback;
}

}  // namespace

CpuInfo probe_cpu(const fs::path& root) {
  CpuInfo info;
  utsname u{};
  if (uname(&u) == 0) info.arch = u.machine;
  info.model = model_name(root);
#if defined(__x86_64__)
  __builtin_cpu_init();
  // The avx2 set needs avx, avx2 and fma; the avx512 set adds avx512f and avx512bw.
  // __builtin_cpu_supports takes a literal, hence the macro.
#define K3_X86_FEATURE(name) info.features.push_back({name, __builtin_cpu_supports(name) != 0})
  K3_X86_FEATURE("sse4.2");
  K3_X86_FEATURE("avx");
  // clang 14's __builtin_cpu_supports does not know "f16c": ask CPUID leaf 1 (ECX bit 29).
  {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
    info.features.push_back({"f16c", f16c});
  }
  K3_X86_FEATURE("fma");
  K3_X86_FEATURE("avx2");
  K3_X86_FEATURE("avx512f");
  K3_X86_FEATURE("avx512bw");
  K3_X86_FEATURE("avx512vl");
  K3_X86_FEATURE("avx512dq");
  K3_X86_FEATURE("avx512vnni");
  K3_X86_FEATURE("avx512bf16");
#undef K3_X86_FEATURE
#elif defined(__aarch64__)
  const unsigned long hw = getauxval(AT_HWCAP);
  const unsigned long hw2 = getauxval(AT_HWCAP2);
  info.features.push_back({"asimd", (hw & HWCAP_ASIMD) != 0});  // the neon set's test
  info.features.push_back({"asimddp", (hw & HWCAP_ASIMDDP) != 0});
  info.features.push_back({"sve", (hw & HWCAP_SVE) != 0});
#ifdef HWCAP2_SVE2
  info.features.push_back({"sve2", (hw2 & HWCAP2_SVE2) != 0});
#endif
#ifdef HWCAP2_BF16
  info.features.push_back({"bf16", (hw2 & HWCAP2_BF16) != 0});
#endif
  (void)hw2;
#endif
  return info;
}

}  // namespace k3::machine
