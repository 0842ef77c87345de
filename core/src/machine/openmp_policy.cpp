// The OpenMP wait policy of this process (k3/machine.hpp): the environment as it was when
// libk3core was loaded, right after the OpenMP runtime it depends on read it, and the
// choice k3host makes when the user made none (docs/benchmarks.md, "OpenMP wait policy":
// with spinning waits a demo run took 6x as long while other processes were busy).
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

#include <k3/machine.hpp>
#include "util/ascii.hpp"

namespace k3::machine {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}


struct AtLoad {
  std::string wait_policy = util::ascii_lower(env("OMP_WAIT_POLICY"));
  std::string spincount = env("GOMP_SPINCOUNT");
  std::string blocktime = env("KMP_BLOCKTIME");  // LLVM's runtime: the user chose there
  std::string marker = util::ascii_lower(env(kOpenMpChoiceMarker));
};

// Initialised when the library is loaded, before main(): what the runtime saw.
const AtLoad g_at_load;
// Written once by main() before any other thread exists (openmp_reexec_failed).
std::string g_reexec_error;

bool user_chose() {
  return !env("OMP_WAIT_POLICY").empty() || !env("GOMP_SPINCOUNT").empty() || !env("KMP_BLOCKTIME").empty();
}

}  // namespace

std::string OpenMpWaitPolicy::effective() const {
  if (wait_policy.empty()) return spincount.empty() ? "default" : "spin GOMP_SPINCOUNT=" + spincount;
  return spincount.empty() ? wait_policy : wait_policy + ", GOMP_SPINCOUNT=" + spincount;
}

std::string OpenMpWaitPolicy::set_by() const {
  switch (source) {
    case Source::user: return "user";
    case Source::k3host: return "k3host";
    case Source::runtime_default: break;
  }
  return "runtime default";
}

std::string OpenMpWaitPolicy::describe() const {
  switch (source) {
    case Source::k3host:
      return "OpenMP wait policy " + effective() +
             ", chosen by k3host (OMP_WAIT_POLICY and GOMP_SPINCOUNT were unset): idle threads sleep instead of "
             "spinning, which keeps a run fast while other processes are busy; set OMP_WAIT_POLICY to choose";
    case Source::user:
      return "OpenMP wait policy " + effective() + ", set by the user (" +
             (!wait_policy.empty() ? "OMP_WAIT_POLICY=" + wait_policy
              : !spincount.empty() ? "GOMP_SPINCOUNT=" + spincount
                                   : "KMP_BLOCKTIME") +
             " in the environment): k3host leaves it alone";
    case Source::runtime_default: break;
  }
  if (!reexec_error.empty())
    return std::string(
               "OpenMP wait policy: the runtime's default (threads spin before they sleep): k3host could "
               "not re-execute itself with OMP_WAIT_POLICY=") +
           kOpenMpWaitPolicyChoice + " (" + reexec_error + "); export OMP_WAIT_POLICY=" + kOpenMpWaitPolicyChoice;
  return "OpenMP wait policy: the runtime's default (nothing set; only the k3host executable applies its choice)";
}

OpenMpWaitPolicy openmp_wait_policy() {
  OpenMpWaitPolicy p;
  p.wait_policy = g_at_load.wait_policy;
  p.spincount = g_at_load.spincount;
  p.reexec_error = g_reexec_error;
  if (!g_at_load.marker.empty() && g_at_load.wait_policy == g_at_load.marker && g_at_load.spincount.empty())
    p.source = OpenMpWaitPolicy::Source::k3host;
  else if (!g_at_load.wait_policy.empty() || !g_at_load.spincount.empty() || !g_at_load.blocktime.empty())
    p.source = OpenMpWaitPolicy::Source::user;
  return p;
}

bool prepare_openmp_reexec() {
  // The user's explicit choice always wins. And once set here the variable is in the
  // re-executed process's environment, so it never re-executes again.
  if (user_chose()) return false;
  if (::setenv("OMP_WAIT_POLICY", kOpenMpWaitPolicyChoice, 1) != 0) return false;
  if (::setenv(kOpenMpChoiceMarker, kOpenMpWaitPolicyChoice, 1) != 0) {
    ::unsetenv("OMP_WAIT_POLICY");
    return false;
  }
  return true;
}

void openmp_reexec_failed(const std::string& reason) {
  ::unsetenv("OMP_WAIT_POLICY");
  ::unsetenv(kOpenMpChoiceMarker);
  g_reexec_error = reason;
}

}  // namespace k3::machine
