// The OpenMP wait-policy decision (the user's choice always wins; k3host's choice set once
// with its marker; a failed re-exec undone and reported) and the CPU probe's feature list.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include <k3/machine.hpp>

namespace m = k3::machine;

namespace {

/// Sets or clears an environment variable for one scope, restoring it after.
class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value != nullptr)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~EnvVar() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }
  EnvVar(const EnvVar&) = delete;
  EnvVar& operator=(const EnvVar&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

}  // namespace

TEST_CASE("openmp: an explicit OMP_WAIT_POLICY, GOMP_SPINCOUNT or KMP_BLOCKTIME is never touched") {
  for (const char* var : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME"}) {
    EnvVar a("OMP_WAIT_POLICY", nullptr), b("GOMP_SPINCOUNT", nullptr), c("KMP_BLOCKTIME", nullptr),
        d(m::kOpenMpChoiceMarker, nullptr);
    EnvVar mine(var, "active");
    CHECK_FALSE(m::prepare_openmp_reexec());
    CHECK(env(var) == "active");
    CHECK(env(m::kOpenMpChoiceMarker).empty());
  }
}

TEST_CASE("openmp: with nothing set, the choice and the marker are set once, and a failure undoes them") {
  EnvVar a("OMP_WAIT_POLICY", nullptr), b("GOMP_SPINCOUNT", nullptr), c("KMP_BLOCKTIME", nullptr),
      d(m::kOpenMpChoiceMarker, nullptr);
  REQUIRE(m::prepare_openmp_reexec());
  CHECK(env("OMP_WAIT_POLICY") == m::kOpenMpWaitPolicyChoice);
  CHECK(env(m::kOpenMpChoiceMarker) == m::kOpenMpWaitPolicyChoice);
  CHECK_FALSE(m::prepare_openmp_reexec());  // the re-executed process: never again

  m::openmp_reexec_failed("execv: test");
  CHECK(env("OMP_WAIT_POLICY").empty());
  CHECK(env(m::kOpenMpChoiceMarker).empty());
  const m::OpenMpWaitPolicy p = m::openmp_wait_policy();
  CHECK(p.reexec_error == "execv: test");
  if (p.source == m::OpenMpWaitPolicy::Source::runtime_default)
    CHECK(p.describe().find("could not re-execute") != std::string::npos);
  m::openmp_reexec_failed("");  // leave no error behind for the other tests
}

TEST_CASE("openmp: what is reported follows the environment at load") {
  // This test executable was started by ctest with whatever environment it has; the
  // report must agree with it (the CLI test checks the k3host cases end to end).
  const m::OpenMpWaitPolicy p = m::openmp_wait_policy();
  CHECK_FALSE(p.effective().empty());
  CHECK_FALSE(p.describe().empty());
  if (p.wait_policy.empty() && p.spincount.empty()) CHECK(p.effective() == "default");
  if (p.source == m::OpenMpWaitPolicy::Source::user) CHECK(p.describe().find("set by the user") != std::string::npos);
}

TEST_CASE("cpu: the architecture and the extensions the kernel sets test") {
  const m::CpuInfo cpu = m::probe_cpu();
  CHECK_FALSE(cpu.arch.empty());
#if defined(__x86_64__)
  bool has_avx2_entry = false;
  for (const auto& f : cpu.features) has_avx2_entry = has_avx2_entry || f.name == "avx2";
  CHECK(has_avx2_entry);
  CHECK(cpu.features.front().name == "sse4.2");
#elif defined(__aarch64__)
  REQUIRE_FALSE(cpu.features.empty());
  CHECK(cpu.features.front().name == "asimd");
#endif
}
