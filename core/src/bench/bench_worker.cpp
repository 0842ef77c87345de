// BenchWorker: a BenchRunner in a child process, so that each pipeline of a bench has a
// process of its own (its own peak RSS, its own threads and memory). Parent and child talk
// over a socket pair (send() with MSG_NOSIGNAL: a side that is gone is an error, not a
// SIGPIPE), one JSON object per line:
//   child → parent: {"ready": info} once loaded and warmed up, {"sample": ...} after each
//                   run, {"error": message, "code": exit code} when it fails (then it exits);
//   parent → child: {"run": what} or {"quit": true}.
// A stop request (LoadHooks::stop in the parent) reaches the child through a shared page,
// copied there while the parent waits: the child's generation then ends at its next token.
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include <k3/bench.hpp>
#include <k3/error.hpp>
#include <k3/json_depth.hpp>

#include "bench/bench_wire.hpp"
#include "util/owned_fd.hpp"

namespace k3 {
namespace {

/// The parent's ends of every live worker's socket: a child closes those of the other
/// workers it inherited, so that a worker's socket has only its parent at the other end.
std::mutex g_fds_mutex;
std::vector<int> g_parent_fds;

void register_fd(int fd) {
  const std::lock_guard lock(g_fds_mutex);
  g_parent_fds.push_back(fd);
}

void unregister_fd(int fd) {
  const std::lock_guard lock(g_fds_mutex);
  std::erase(g_parent_fds, fd);
}

/// An atomic flag in an anonymous shared mapping: the same flag in parent and child.
class SharedFlag {
 public:
  SharedFlag() {
    void* p = ::mmap(nullptr, sizeof(std::atomic<bool>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw RuntimeError(std::string("bench: cannot map a shared page: ") + std::strerror(errno));
    flag_ = new (p) std::atomic<bool>(false);
  }
  ~SharedFlag() { ::munmap(flag_, sizeof(std::atomic<bool>)); }
  SharedFlag(const SharedFlag&) = delete;
  SharedFlag& operator=(const SharedFlag&) = delete;
  [[nodiscard]] std::atomic<bool>& get() noexcept { return *flag_; }

 private:
  std::atomic<bool>* flag_ = nullptr;
};

/// One message: JSON on one line (text that is not UTF-8, such as a prompt cut inside a
/// character, is replaced rather than refused).
std::string message(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// Writes a whole line; false when the other side is gone.
bool write_line(int fd, const std::string& text) {
  const std::string line = text + "\n";
  std::size_t at = 0;
  while (at < line.size()) {
    const ssize_t n = ::send(fd, line.data() + at, line.size() - at, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += static_cast<std::size_t>(n);
  }
  return true;
}

/// Reads up to the next newline into `line` (buffering the rest in `buffer`); false when
/// the other side is gone. `idle` is called every 100 ms while nothing arrives.
template <class Idle>
bool read_line(int fd, std::string& buffer, std::string& line, Idle&& idle) {
  for (;;) {
    if (const auto nl = buffer.find('\n'); nl != std::string::npos) {
      line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      return true;
    }
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, 100);
    if (ready < 0 && errno != EINTR) throw RuntimeError(std::string("bench: poll failed: ") + std::strerror(errno));
    if (ready <= 0) {
      idle();
      continue;
    }
    char chunk[4096];
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    // A peer that died with our request unread resets the connection: gone, like end of file.
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return false;
    if (n < 0) throw RuntimeError(std::string("bench: reading from a worker failed: ") + std::strerror(errno));
    buffer.append(chunk, static_cast<std::size_t>(n));
  }
}

/// One message read back: our own JSON, but held to the one nesting bound like every JSON read.
nlohmann::json parse_message(const std::string& line) {
  if (const auto deep = sdk::json_too_deep(line))
    throw RuntimeError(sdk::json_depth_message("bench: a worker message", *deep));
  return nlohmann::json::parse(line);
}

std::string how_it_ended(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + (name ? std::string(" (") + name + ")" : "");
  }
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  return "ended";
}

}  // namespace

struct BenchWorker::Impl {
  std::string name;  ///< the pipeline file, for messages
  pid_t pid = -1;
  OwnedFd socket;
  std::string buffer;
  SharedFlag shared_stop;
  const std::atomic<bool>* stop = nullptr;
  BenchInfo info;

  /// The child's next message; a dead child or an error message becomes the exception.
  nlohmann::json receive() {
    std::string line;
    const bool got = read_line(socket.get(), buffer, line, [&] {
      if (stop != nullptr && stop->load()) shared_stop.get().store(true);
    });
    if (!got) {
      int status = 0;
      const pid_t gone = ::waitpid(pid, &status, 0);
      pid = -1;
      throw RuntimeError("bench: the worker process of " + name + " " +
                         (gone > 0 ? how_it_ended(status) : std::string("ended")) + " before it answered");
    }
    nlohmann::json j = parse_message(line);
    if (j.contains("error")) {
      wait_child();
      throw Error(static_cast<ExitCode>(j.at("code").get<int>()), j.at("error").get<std::string>());
    }
    return j;
  }

  void wait_child() noexcept {
    if (pid <= 0) return;
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    pid = -1;
  }

  /// The child's life: load, warm up, then runs on request. Never returns.
  [[noreturn]] void child(const Pipeline& pipeline, const BenchSettings& settings, const LoadHooks& hooks,
                          const BenchProgress& progress, const std::string& warmup_what, pid_t parent,
                          int fd) noexcept {
    // Dies with the parent (a second Ctrl-C exits the parent at once); the terminal's
    // signals are the parent's to handle.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(static_cast<int>(ExitCode::runtime));
    std::signal(SIGINT, SIG_IGN);
    std::signal(SIGTERM, SIG_IGN);
    {
      const std::lock_guard lock(g_fds_mutex);
      for (const int other : g_parent_fds) ::close(other);
    }
    int code = 0;
    try {
      LoadHooks h = hooks;
      h.stop = &shared_stop.get();
      BenchRunner runner(pipeline, settings, h);
      runner.warm_up(warmup_what, progress);
      if (!write_line(fd, message({{"ready", runner.info()}}))) ::_exit(code);
      std::string buf, line;
      while (read_line(fd, buf, line, [] {})) {
        const nlohmann::json request = parse_message(line);
        if (!request.contains("run")) break;
        const BenchSample s = runner.run(request.at("run").get<std::string>(), progress);
        if (!write_line(fd, message({{"sample", s}}))) break;
      }
    } catch (const Error& e) {
      code = static_cast<int>(e.code());
      (void)write_line(fd, message({{"error", e.what()}, {"code", code}}));
    } catch (const std::exception& e) {
      code = static_cast<int>(ExitCode::runtime);
      (void)write_line(fd, message({{"error", std::string("internal error in the bench worker: ") + e.what()},
                                    {"code", code}}));
    }
    // _exit: the parent's atexit handlers and static objects are the parent's business.
    std::fflush(nullptr);
    ::_exit(code);
  }
};

BenchWorker::BenchWorker(const Pipeline& pipeline, const BenchSettings& settings, const LoadHooks& hooks,
                         const BenchProgress& progress, const std::string& warmup_what)
    : impl_(std::make_unique<Impl>()) {
  Impl& w = *impl_;
  w.name = pipeline.file().string();
  w.stop = hooks.stop;
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
    throw RuntimeError(std::string("bench: cannot make a socket pair: ") + std::strerror(errno));
  OwnedFd mine(pair[0]), theirs(pair[1]);
  const pid_t parent = ::getpid();
  std::fflush(nullptr);  // nothing buffered in the parent is written twice
  const pid_t pid = ::fork();
  if (pid < 0) throw RuntimeError(std::string("bench: cannot start a worker process: ") + std::strerror(errno));
  if (pid == 0) {
    mine.reset();
    w.child(pipeline, settings, hooks, progress, warmup_what, parent, theirs.get());
  }
  w.pid = pid;
  w.socket = std::move(mine);
  theirs.reset();
  register_fd(w.socket.get());
  try {
    w.receive().at("ready").get_to(w.info);
  } catch (...) {
    unregister_fd(w.socket.get());
    throw;  // ~Impl closes the socket; receive() reaped the child
  }
}

BenchWorker::~BenchWorker() {
  Impl& w = *impl_;
  unregister_fd(w.socket.get());
  if (w.pid > 0 && !write_line(w.socket.get(), R"({"quit":true})")) ::kill(w.pid, SIGKILL);
  w.socket.reset();
  w.wait_child();
}

const BenchInfo& BenchWorker::info() const noexcept { return impl_->info; }

BenchSample BenchWorker::run(const std::string& what) {
  Impl& w = *impl_;
  if (w.pid <= 0) throw RuntimeError("bench: the worker process of " + w.name + " is gone");
  if (!write_line(w.socket.get(), message({{"run", what}})))
    throw RuntimeError("bench: the worker process of " + w.name + " does not take requests any more");
  return w.receive().at("sample").get<BenchSample>();
}

}  // namespace k3
