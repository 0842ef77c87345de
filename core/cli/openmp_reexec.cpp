// The OpenMP wait policy k3host runs with when the user chose none (docs/benchmarks.md,
// "OpenMP wait policy"). libgomp reads OMP_WAIT_POLICY when it is loaded, before main(), so
// setting it in main() would be too late: main() sets it and re-executes this program once
// (/proc/self/exe, same arguments, same pid). The re-executed process sees the variable set
// and never re-executes again; an explicit OMP_WAIT_POLICY, GOMP_SPINCOUNT or KMP_BLOCKTIME
// of the user is never touched. If exec fails the run goes on with the runtime's default,
// and says why at debug level (and in `k3host doctor`).
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <k3/log.hpp>
#include <k3/machine.hpp>

#include "cli.hpp"

namespace k3::cli {

void apply_openmp_wait_policy(char** argv) {
  if (!machine::prepare_openmp_reexec()) return;
  ::execv("/proc/self/exe", argv);
  machine::openmp_reexec_failed(std::string("execv /proc/self/exe: ") + std::strerror(errno));
}

void log_openmp_wait_policy() { log(LogLevel::debug, "", machine::openmp_wait_policy().describe()); }

}  // namespace k3::cli
