#include "stop_signal.hpp"

#include <signal.h>
#include <unistd.h>

#include <k3/error.hpp>
#include <k3/temporaries.hpp>

namespace k3::cli {
namespace {

// Signal handlers may touch only lock-free atomics and async-signal-safe calls.
std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};
struct sigaction g_old_int {
}, g_old_term{};

void on_signal(int sig) {
  if (g_stop.exchange(true)) {  // the second one: no half-written file, no temporary file
    remove_live_temporaries();
    static const char bye[] = "\n[k3host] warning: interrupted again: exiting at once (nothing more is written)\n";
    (void)!write(STDERR_FILENO, bye, sizeof bye - 1);
    _exit(static_cast<int>(ExitCode::interrupted));
  }
  g_signal.store(sig);
  static const char msg[] = "\n[k3host] info: stopping at the next token (Ctrl-C again to quit at once)\n";
  (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
}

}  // namespace

StopSignal::StopSignal() {
  static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free);
  clear();
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking read (the chat prompt) returns EINTR
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

StopSignal::~StopSignal() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

const std::atomic<bool>& StopSignal::flag() const noexcept { return g_stop; }

int StopSignal::signal_number() const noexcept { return g_signal.load(); }

void StopSignal::clear() noexcept {
  g_signal.store(0);
  g_stop.store(false);
}

}  // namespace k3::cli
