// Selection: each SIMD set's score says whether this CPU can run it (checked here against
// the kernel's own view of the CPU, /proc/cpuinfo), a wider set scores higher, and
// best_kernels() picks the widest runnable set.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "simd_sets.hpp"

namespace {

/// The feature flags Linux reports for cpu 0 (it lists AVX-512 only when the OS enabled it).
std::set<std::string> cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0 && line.rfind("Features", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> out;
    for (std::string w; words >> w;) out.insert(w);
    return out;
  }
  return {};
}

bool has_all(const std::set<std::string>& flags, std::initializer_list<const char*> need) {
  for (const char* f : need)
    if (flags.count(f) == 0) return false;
  return true;
}

}  // namespace

TEST_CASE("each SIMD set is runnable exactly when the CPU has its features", "[kernels_simd][selection]") {
  const auto flags = cpuinfo_flags();
  if (flags.empty()) {
    WARN("SKIP: /proc/cpuinfo has no flags line to compare against");
    return;
  }
#if defined(__x86_64__)
  const struct {
    const char* set;
    bool expected;
  } cases[] = {{"avx2", has_all(flags, {"avx", "avx2", "fma"})},
               {"avx512", has_all(flags, {"avx", "avx2", "fma", "avx512f", "avx512bw"})}};
#elif defined(__aarch64__)
  const struct {
    const char* set;
    bool expected;
  } cases[] = {{"neon", has_all(flags, {"asimd"})}};
#else
  WARN("SKIP: no SIMD kernel set exists for this architecture");
  return;
#endif
  for (const auto& c : cases) {
    const k3::PluginInfo* info = k3simd::find_kernels(c.set);
    if (info == nullptr) {
      WARN("SKIP " << c.set << ": plugin not built");
      continue;
    }
    INFO("set " << c.set << " score " << info->score);
    CHECK((info->score > 0) == c.expected);
    if (c.expected) CHECK(k3simd::host().create_kernels(c.set, {})->name() == c.set);
  }
}

TEST_CASE("a wider set scores higher and auto selection picks the widest runnable one", "[kernels_simd][selection]") {
  const k3::PluginInfo* scalar = k3simd::find_kernels("scalar");
  REQUIRE(scalar != nullptr);
  CHECK(scalar->score == 1);
  const k3::PluginInfo* widest = scalar;
  const k3::PluginInfo* previous = scalar;
  for (const auto& name : k3simd::simd_set_names()) {  // listed narrowest first
    const k3::PluginInfo* info = k3simd::find_kernels(name);
    if (info == nullptr || info->score == 0) {
      WARN("SKIP " << name << ": not built or not runnable here");
      continue;
    }
    INFO(name << " score " << info->score << " vs " << previous->name << " " << previous->score);
    CHECK(info->score > previous->score);
    previous = info;
    widest = info;
  }
  CHECK(k3simd::host().best_kernels().name == widest->name);
}
