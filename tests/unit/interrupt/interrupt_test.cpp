// Ctrl-C in a batch run, end to end: the real k3host binary on the tiny model, real signals.
//   - the first SIGINT (or SIGTERM) stops at the next token: exit 5, the report (valid JSON,
//     "interrupted": true, the printed tokens), the state and a consistent partial trace
//     are written, no temporary file is left, and --load-state without a prompt continues
//     so that both runs' ids together are an uninterrupted run's, greedy and seeded;
//   - a second SIGINT exits at once with 5: nothing more is written and the temporary of
//     the trace being recorded is gone too.
// The runs wait for generated text on stdout before signalling, so the signal lands in the
// decode; the second-signal case reads its experts and trunk through `throttle` (100 ms a
// batch) so that a token takes long enough for both signals to land inside it.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <k3/pipeline.hpp>
#include <k3/plugin_host.hpp>
#include <k3/runtime.hpp>
#include <k3/trace.hpp>

#include "test_models.hpp"
#include "util/owned_fd.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

k3::test::ScratchCleanup cleanup;

/// k3host ARGS... with stdout and stderr read through pipes. The destructor kills and reaps
/// a child still running, so a failed check never leaves a process behind.
class Child {
 public:
  explicit Child(const std::vector<std::string>& args) {
    int out[2], err[2];
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
    out_.reset(out[0]);
    err_.reset(err[0]);
    const k3::OwnedFd out_w(out[1]), err_w(err[1]);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out_w.get(), STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err_w.get(), STDERR_FILENO);
    // The child starts with SIGINT and SIGTERM at their defaults and unblocked, whatever
    // the test runner did with them; k3host installs its own handlers.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    std::vector<std::string> argv_text{K3_HOST_EXE};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, K3_HOST_EXE, &actions, &attr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    REQUIRE(rc == 0);
    for (const auto& a : argv_text) shown_ += a + " ";
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  /// Reads stdout and stderr until `ready()` holds; false on timeout or when both end first.
  bool wait_for(const std::function<bool()>& ready, double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!ready()) {
      if ((!out_ && !err_) || std::chrono::steady_clock::now() > deadline) return false;
      pump(50);
    }
    return true;
  }

  void signal(int sig) const { REQUIRE(::kill(pid_, sig) == 0); }

  /// Reads both pipes to their end and reaps the child: its exit code, or 128 + the signal
  /// that killed it; -1 when it did not end within `seconds` (it is killed then).
  int finish(double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while ((out_ || err_) && std::chrono::steady_clock::now() < deadline) pump(50);
    if (out_ || err_) return -1;
    int status = 0;
    REQUIRE(::waitpid(pid_, &status, 0) == pid_);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  [[nodiscard]] const std::string& out() const noexcept { return out_text_; }
  [[nodiscard]] const std::string& err() const noexcept { return err_text_; }
  /// The command line and what it printed, for failure messages.
  [[nodiscard]] std::string shown() const {
    return shown_ + "\n--- stdout:\n" + out_text_ + "\n--- stderr:\n" + err_text_;
  }

 private:
  void pump(int timeout_ms) {
    pollfd fds[2];
    int n = 0;
    for (k3::OwnedFd* fd : {&out_, &err_})
      if (*fd) fds[n++] = {fd->get(), POLLIN, 0};
    if (n == 0 || ::poll(fds, static_cast<nfds_t>(n), timeout_ms) <= 0) return;
    for (int i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      k3::OwnedFd& fd = fds[i].fd == out_.get() ? out_ : err_;
      std::string& text = &fd == &out_ ? out_text_ : err_text_;
      char buf[4096];
      const ssize_t got = ::read(fd.get(), buf, sizeof buf);
      if (got > 0)
        text.append(buf, static_cast<std::size_t>(got));
      else if (got == 0 || errno != EINTR)
        fd.reset();
    }
  }

  pid_t pid_ = -1;
  bool reaped_ = false;
  k3::OwnedFd out_, err_;
  std::string out_text_, err_text_, shown_;
};

/// The pipeline every run uses: the tiny model, one thread, no EOS stop (a run ends at its
/// limit or its signal), only the generated text on stdout (-q).
std::vector<std::string> common_args() {
  return {"--config", std::string(K3_SOURCE_DIR) + "/configs/default.yaml",
          "--set",    "model.path=" + k3::test::test_model("tiny").string(),
          "--set",    "model.generate_if_missing=false",
          "--set",    "job.stop_at_eos=false",
          "--set",    "threads=1",
          "--set",    "memory.context=4096",
          "-q"};
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  REQUIRE(in);
  return nlohmann::json::parse(in);  // throws (failing the test) on invalid JSON
}

std::vector<std::uint32_t> ids_of(const nlohmann::json& report, const char* key) {
  return report.at(key).get<std::vector<std::uint32_t>>();
}

/// Files under `dir` whose name holds ".tmp" (the atomic writer's "<file>.tmp.<pid>", a
/// folder's ".<name>.k3tmp.<pid>.*"), recursively.
std::vector<std::string> temporaries_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp") != std::string::npos ||
        e.path().filename().string().find(".k3tmp") != std::string::npos)
      out.push_back(e.path().string());
  return out;
}

/// The tiny model's tokenizer, to check that stdout printed exactly the report's ids.
std::string decode(const std::vector<std::uint32_t>& ids) {
  static k3::PluginHost host;
  static const k3::Pipeline pipeline = k3::load_pipeline(std::string(K3_SOURCE_DIR) + "/configs/default.yaml",
                                                         {"model.path=" + k3::test::test_model("tiny").string(),
                                                          "model.generate_if_missing=false", "job.report="});
  static const k3::Runtime runtime(pipeline, host);
  return runtime.decode(ids);
}

}  // namespace

TEST_CASE(
    "Ctrl-C or SIGTERM stops at a token with exit 5 after writing report and state and trace: resuming continues "
    "exactly",
    "[interrupt][cli]") {
  struct Mode {
    const char* name;
    int sig;
    const char* by;
    std::vector<std::string> sampling;
  };
  for (const Mode& mode : {Mode{"greedy", SIGINT, "Ctrl-C", {}},
                           Mode{"seeded",
                                SIGTERM,
                                "SIGTERM",
                                {"--set", "job.sampling.temperature=0.9", "--set", "job.sampling.seed=11"}}}) {
    DYNAMIC_SECTION(mode.name << ", " << mode.by) {
      const fs::path out = k3::test::scratch_dir() / (std::string("stop-") + mode.name);
      fs::create_directories(out);
      const std::vector<std::string> base = common_args() + mode.sampling;
      constexpr int kLimit = 2000;  // far more than the run gets to before the signal lands

      Child run(base + std::vector<std::string>{"--set", "job.max_new_tokens=" + std::to_string(kLimit), "--out",
                                                (out / "report.json").string(), "--save-state",
                                                (out / "state.k3state").string(), "--set",
                                                "trace.out=" + (out / "trace.k3trace").string()});
      REQUIRE(run.wait_for([&] { return !run.out().empty(); }, 120));  // generated text: the decode runs
      run.signal(mode.sig);
      const int code = run.finish(120);
      INFO(run.shown());
      REQUIRE(code == 5);

      const nlohmann::json report = read_json(out / "report.json");
      CHECK(report.at("interrupted") == true);
      CHECK(report.at("stopped_at_eos") == false);
      const auto first = ids_of(report, "generated_ids");
      REQUIRE(!first.empty());
      CHECK(first.size() < static_cast<std::size_t>(kLimit));
      // The tokens printed are the tokens reported, and the last of them waits in the state.
      CHECK(run.out() == decode(first) + "\n");
      CHECK(ids_of(report, "pending_ids") == std::vector<std::uint32_t>{first.back()});
      CHECK(report.at("state") == (out / "state.k3state").string());
      // One line on stderr says what happened and where things went.
      CHECK_THAT(run.err(), Contains(std::string("[k3host] warning: interrupted by ") + mode.by + " after " +
                                     std::to_string(first.size()) + " generated tokens; state saved to " +
                                     (out / "state.k3state").string()));
      CHECK(temporaries_in(out).empty());

      // The trace is complete and consistent: it holds the requests of every id fed, the
      // prompt and all but the last generated token, and (speculative decoding) those of
      // drafts checked past the last kept token, at most max_draft (4) positions further.
      const k3::Trace trace = k3::read_trace(out / "trace.k3trace");
      REQUIRE(!trace.records.empty());
      std::uint32_t last_position = 0;
      for (const auto& r : trace.records) last_position = std::max(last_position, r.position);
      const std::size_t prompt = ids_of(report, "prompt_ids").size();
      CHECK(last_position + 2 >= prompt + first.size());
      CHECK(last_position + 2 <= prompt + first.size() + 4);

      // Resume: --load-state and no prompt continues the conversation.
      constexpr int kMore = 6;
      Child resume(base + std::vector<std::string>{"--set", "job.max_new_tokens=" + std::to_string(kMore),
                                                   "--load-state", (out / "state.k3state").string(), "--out",
                                                   (out / "resume.json").string()});
      const int resume_code = resume.finish(120);
      INFO(resume.shown());
      REQUIRE(resume_code == 0);
      const nlohmann::json resumed = read_json(out / "resume.json");
      CHECK(ids_of(resumed, "prompt_ids").empty());
      CHECK(ids_of(resumed, "resumed_pending_ids") == std::vector<std::uint32_t>{first.back()});
      CHECK(resumed.at("interrupted") == false);
      auto both = first;
      for (const auto id : ids_of(resumed, "generated_ids")) both.push_back(id);

      // The same pipeline uninterrupted, for as many tokens as the two runs together.
      Child whole(base + std::vector<std::string>{"--set", "job.max_new_tokens=" + std::to_string(both.size()), "--out",
                                                  (out / "whole.json").string()});
      const int whole_code = whole.finish(120);
      INFO(whole.shown());
      REQUIRE(whole_code == 0);
      CHECK(ids_of(read_json(out / "whole.json"), "generated_ids") == both);
      CHECK(temporaries_in(out).empty());
    }
  }
}

TEST_CASE("a second Ctrl-C exits at once with 5 and leaves no temporary file", "[interrupt][cli]") {
  const fs::path out = k3::test::scratch_dir() / "twice";
  fs::create_directories(out);
  Child run(common_args() + std::vector<std::string>{"--set", "memory.trunk_gb=0.00005", "--set",
                                                     "memory.expert_cache_gb=0.00005", "--set",
                                                     "storage.plugin=throttle", "--set",
                                                     "storage.params={inner: posix, latency_us: 100000}", "--set",
                                                     "job.max_new_tokens=2000", "--out", (out / "report.json").string(),
                                                     "--save-state", (out / "state.k3state").string(), "--set",
                                                     "trace.out=" + (out / "trace.k3trace").string()});
  REQUIRE(run.wait_for([&] { return !run.out().empty(); }, 120));
  // The trace is being recorded: its temporary file is there.
  REQUIRE(temporaries_in(out).size() == 1);
  run.signal(SIGINT);
  // Standard signals do not queue: send the second only once the first was handled.
  REQUIRE(run.wait_for([&] { return run.err().find("stopping at the next token") != std::string::npos; }, 60));
  run.signal(SIGINT);
  const int code = run.finish(60);
  INFO(run.shown());
  CHECK(code == 5);
  CHECK_THAT(run.err(), Contains("interrupted again: exiting at once"));
  CHECK(temporaries_in(out).empty());
  // At once: the run did not get to write anything more.
  CHECK_FALSE(fs::exists(out / "report.json"));
  CHECK_FALSE(fs::exists(out / "state.k3state"));
  CHECK_FALSE(fs::exists(out / "trace.k3trace"));
}
