// A loopback HTTP server for tests of the http storage plugin: tests/support/run_nginx.py
// serving a folder at http://127.0.0.1:<free port>/m/ with nginx (unprivileged, its prefix
// in the scratch dir). The server stops when this object goes, when the test process
// exits, or after its lifetime. When nginx is missing, url() is empty and skip_reason()
// says why: tests report a SKIP, never a pass.
#pragma once
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace k3::test {

class LoopbackHttp {
 public:
  /// Serves `root`; `work` holds the nginx prefix and the port file.
  LoopbackHttp(const std::filesystem::path& root, const std::filesystem::path& work) {
    std::filesystem::create_directories(work);
    const std::string script = std::string(K3_SOURCE_DIR) + "/tests/support/run_nginx.py";
    const std::string port_file = (work / "nginx.port").string();
    std::filesystem::remove(port_file);
    std::vector<std::string> args{"/usr/bin/python3",        script,        "--root",  root.string(), "--prefix",
                                  (work / "nginx").string(), "--port-file", port_file, "--lifetime",  "900"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (::access(argv[0], X_OK) != 0) {
      skip_ = "/usr/bin/python3 is missing";
      return;
    }
    if (::posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ) != 0) {
      pid_ = -1;
      skip_ = "cannot start run_nginx.py";
      return;
    }
    for (int i = 0; i < 200; ++i) {  // at most 10 s
      if (std::ifstream in(port_file); in) {
        int port = 0;
        if (in >> port && port > 0) {
          url_ = "http://127.0.0.1:" + std::to_string(port) + "/m/";
          return;
        }
      }
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        skip_ = WIFEXITED(status) && WEXITSTATUS(status) == 77
                    ? "nginx is not installed"
                    : "nginx did not start (see its error.log in " + work.string() + ")";
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    skip_ = "nginx did not listen within 10 s";
  }
  ~LoopbackHttp() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  LoopbackHttp(const LoopbackHttp&) = delete;
  LoopbackHttp& operator=(const LoopbackHttp&) = delete;

  /// "http://127.0.0.1:<port>/m/", or empty when the server could not run.
  [[nodiscard]] const std::string& url() const noexcept { return url_; }
  [[nodiscard]] const std::string& skip_reason() const noexcept { return skip_; }

 private:
  pid_t pid_ = -1;
  std::string url_;
  std::string skip_;
};

}  // namespace k3::test
