// The OpenMP wait policy k3host runs with when the user chose none (docs/benchmarks.md,
// "OpenMP wait policy"). libgomp reads OMP_WAIT_POLICY when it is loaded, before main(), so
// setting it in main() would be too late: main() sets it and re-executes this program once
// (same file, same arguments, same pid). The kernel names a process after the basename of
// the path it was executed by (/proc/PID/comm: what ps, top, pgrep -x and ss -p show), so the
// re-execution goes through the file's own path, which /proc/self/exe links to, and keeps
// the name k3host; /proc/self/exe itself (which would rename the process "exe") is only the
// fallback for a file that is gone or replaced since it started. The re-executed process sees the variable set
// and never re-executes again; an explicit OMP_WAIT_POLICY, GOMP_SPINCOUNT or KMP_BLOCKTIME
// of the user is never touched. If exec fails the run goes on with the runtime's default,
// and says why at debug level (and in `k3host doctor`).
#include <sys/stat.h>
#include <unistd.h>

#include <climits>

#include <cerrno>
#include <cstring>
#include <string>

#include <k3/log.hpp>
#include <k3/machine.hpp>

#include "cli.hpp"

namespace k3::cli {

namespace {

/// The path of the running executable when it still names that very file, else "".
std::string own_path() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  buf[n] = '\0';
  struct stat by_path {
  }, running{};
  if (::stat(buf, &by_path) != 0 || ::stat("/proc/self/exe", &running) != 0) return {};
  if (by_path.st_dev != running.st_dev || by_path.st_ino != running.st_ino) return {};
  return buf;
}

}  // namespace

void apply_openmp_wait_policy(char** argv) {
  if (!machine::prepare_openmp_reexec()) return;
  const std::string self = own_path();
  const char* file = self.empty() ? "/proc/self/exe" : self.c_str();
  ::execv(file, argv);
  machine::openmp_reexec_failed(std::string("execv ") + file + ": " + std::strerror(errno));
}

void log_openmp_wait_policy() { log(LogLevel::debug, "", machine::openmp_wait_policy().describe()); }

}  // namespace k3::cli
