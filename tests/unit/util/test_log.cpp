// util/log: level names, which of flag, K3_LOG_LEVEL and default wins, the line format, the
// log file with its timestamps, and a log line that never continues the job's open line of
// text where stdout and stderr share a destination.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <regex>
#include <string>

#include <k3/error.hpp>
#include <k3/log.hpp>

#include "util_test_support.hpp"

using Catch::Matchers::Contains;
using k3::LogLevel;
using k3::LogRequest;

namespace {

// Restores the process-wide logger state a test changes.
struct RestoreLogging {
  LogLevel saved = k3::log_level();
  ~RestoreLogging() {
    k3::set_log_file({});
    k3::set_log_level(saved);
  }
};

LogRequest flags(std::string level, int verbose, bool quiet) {
  LogRequest r;
  r.level = std::move(level);
  r.verbose = verbose;
  r.quiet = quiet;
  return r;
}

}  // namespace

TEST_CASE("every level name parses, in any case, and round-trips", "[util][log]") {
  for (const LogLevel l :
       {LogLevel::trace, LogLevel::debug, LogLevel::info, LogLevel::warn, LogLevel::error, LogLevel::off}) {
    const std::string name(k3::log_level_name(l));
    CHECK(k3::parse_log_level(name, "test") == l);
    std::string upper = name;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    CHECK(k3::parse_log_level(upper, "test") == l);
  }
  CHECK(k3::parse_log_level("warning", "test") == LogLevel::warn);
}

TEST_CASE("a bad level is a usage error naming where it came from and the choices", "[util][log]") {
  for (const char* bad : {"verbose", "", "2", "inf", "debug "}) {
    try {
      (void)k3::parse_log_level(bad, "K3_LOG_LEVEL");
      FAIL("accepted '" << bad << "'");
    } catch (const k3::UsageError& e) {
      CHECK(e.code() == k3::ExitCode::usage);
      CHECK(std::string(e.what()) ==
            "K3_LOG_LEVEL: '" + std::string(bad) + "' is not a log level (trace, debug, info, warn, error or off)");
    }
  }
}

TEST_CASE("a flag beats K3_LOG_LEVEL, which beats the default", "[util][log]") {
  using k3::resolve_log_level;
  SECTION("nothing said: info") {
    CHECK(resolve_log_level({}, nullptr).level == LogLevel::info);
    CHECK(resolve_log_level({}, nullptr).source == "default");
    CHECK(resolve_log_level({}, "").level == LogLevel::info);  // an empty variable is unset
  }
  SECTION("the environment alone") {
    const auto r = resolve_log_level({}, "error");
    CHECK(r.level == LogLevel::error);
    CHECK(r.source == "K3_LOG_LEVEL");
    CHECK(resolve_log_level({}, "TRACE").level == LogLevel::trace);
  }
  SECTION("each flag over the environment") {
    CHECK(resolve_log_level(flags("debug", 0, false), "error").level == LogLevel::debug);
    CHECK(resolve_log_level(flags("debug", 0, false), "error").source == "--log-level");
    CHECK(resolve_log_level(flags("", 1, false), "error").level == LogLevel::debug);
    CHECK(resolve_log_level(flags("", 1, false), "error").source == "-v");
    CHECK(resolve_log_level(flags("", 0, true), "trace").level == LogLevel::warn);
    CHECK(resolve_log_level(flags("", 0, true), "trace").source == "-q");
    CHECK(resolve_log_level(flags("off", 0, false), "debug").level == LogLevel::off);
  }
  SECTION("-v once is debug, more is trace") {
    CHECK(resolve_log_level(flags("", 2, false), nullptr).level == LogLevel::trace);
    CHECK(resolve_log_level(flags("", 5, false), nullptr).level == LogLevel::trace);
  }
  SECTION("a bad environment value is an error unless a flag decides") {
    CHECK_THROWS_AS(resolve_log_level({}, "loud"), k3::UsageError);
    CHECK_THROWS_WITH(resolve_log_level({}, "loud"), Contains("K3_LOG_LEVEL: 'loud' is not a log level"));
    CHECK(resolve_log_level(flags("", 0, true), "loud").level == LogLevel::warn);
  }
  SECTION("a bad flag value names the flag") {
    CHECK_THROWS_WITH(resolve_log_level(flags("chatty", 0, false), "info"),
                      Contains("--log-level: 'chatty' is not a log level"));
  }
}

TEST_CASE("the level decides what is written, off writes nothing", "[util][log]") {
  const RestoreLogging restore;
  k3::set_log_level(LogLevel::warn);
  CHECK_FALSE(k3::log_enabled(LogLevel::info));
  CHECK(k3::log_enabled(LogLevel::warn));
  CHECK(k3::log_enabled(LogLevel::error));
  k3::set_log_level(LogLevel::trace);
  CHECK(k3::log_enabled(LogLevel::trace));
  CHECK_FALSE(k3::log_enabled(LogLevel::off));  // "off" is a threshold, never a line's level
  k3::set_log_level(LogLevel::off);
  CHECK_FALSE(k3::log_enabled(LogLevel::error));
}

TEST_CASE("every line has one form: who wrote it in brackets, then the level", "[util][log]") {
  CHECK(k3::format_log_line(LogLevel::info, "", "loading models/tiny") == "[k3host] info: loading models/tiny");
  CHECK(k3::format_log_line(LogLevel::warn, "", "slow disk") == "[k3host] warning: slow disk");
  CHECK(k3::format_log_line(LogLevel::error, "", "bad file") == "[k3host] error: bad file");
  CHECK(k3::format_log_line(LogLevel::info, "serve", "ready") == "[serve] info: ready");
  CHECK(k3::format_log_line(LogLevel::debug, "storage/posix", "opened a (3 bytes)") ==
        "[storage/posix] debug: opened a (3 bytes)");
  CHECK(k3::format_log_line(k3::from_sdk(k3::sdk::LogLevel::info), "cache/lru", "hi") == "[cache/lru] info: hi");
  CHECK(k3::from_sdk(k3::sdk::LogLevel::warn) == LogLevel::warn);
  CHECK(k3::from_sdk(k3::sdk::LogLevel::error) == LogLevel::error);
  CHECK(k3::from_sdk(k3::sdk::LogLevel::debug) == LogLevel::debug);
}

TEST_CASE("the log file gets every line that passes the level, each with its date and time", "[util][log]") {
  const RestoreLogging restore;
  const k3::test::ScratchDir dir("logfile");
  const auto file = dir / "logs/run.log";  // the folder is created
  k3::set_log_level(LogLevel::info);
  k3::set_log_file(file);
  k3::log(LogLevel::info, "", "first {} line");  // braces are text, not a format
  k3::log(LogLevel::debug, "", "below the level");
  k3::log(k3::sdk::LogLevel::warn, "storage/posix", "from a plugin");
  k3::log_text(LogLevel::info, "memory plan\n  trunk   1 GB\n");  // a table: each line as it is
  k3::log_text(LogLevel::debug, "a table below the level\n");
  k3::set_log_file({});  // closes it
  k3::log(LogLevel::error, "", "after the file was closed");

  const std::string text = k3::test::read_whole(file);
  const std::string stamp = R"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3} )";
  const std::regex want(stamp + R"(\[k3host\] info: first \{\} line\n)" + stamp +
                        R"(\[storage/posix\] warning: from a plugin\n)" + stamp + "memory plan\n" + stamp +
                        "  trunk   1 GB\n");
  CHECK(std::regex_match(text, want));
  CHECK(text.find("below the level") == std::string::npos);  // neither line
  CHECK(text.find("after the file") == std::string::npos);

  SECTION("a second run appends") {
    k3::set_log_file(file);
    k3::log(LogLevel::info, "", "second run");
    k3::set_log_file({});
    const std::string again = k3::test::read_whole(file);
    CHECK(again.substr(0, text.size()) == text);
    CHECK_THAT(again.substr(text.size()), Contains("[k3host] info: second run"));
  }
}

TEST_CASE("a log file that cannot be opened is a usage error naming it", "[util][log]") {
  const RestoreLogging restore;
  const k3::test::ScratchDir dir("badlog");
  std::filesystem::create_directories(dir / "a-folder");
  CHECK_THROWS_AS(k3::set_log_file(dir / "a-folder"), k3::UsageError);
  CHECK_THROWS_WITH(k3::set_log_file(dir / "a-folder"), Contains("a-folder: a folder, not a regular file"));
}

namespace {

/// Points stdout and stderr at two fresh pipes, or both at one, for the life of the object,
/// and collects what each received.
class Redirected {
 public:
  explicit Redirected(bool shared) {
    std::fflush(stdout);
    std::fflush(stderr);
    saved_out_ = ::dup(STDOUT_FILENO);
    saved_err_ = ::dup(STDERR_FILENO);
    REQUIRE(::pipe(out_) == 0);
    if (!shared) REQUIRE(::pipe(err_) == 0);
    for (const int fd : {out_[0], err_[0]})
      if (fd >= 0) ::fcntl(fd, F_SETFL, O_NONBLOCK);
    ::dup2(out_[1], STDOUT_FILENO);
    ::dup2(shared ? out_[1] : err_[1], STDERR_FILENO);
  }
  ~Redirected() { restore(); }
  Redirected(const Redirected&) = delete;
  Redirected& operator=(const Redirected&) = delete;

  /// Restores stdout and stderr; returns what stdout's pipe (then stderr's) received.
  std::pair<std::string, std::string> finish() {
    restore();
    return {drain(out_[0]), drain(err_[0])};
  }

 private:
  void restore() {
    if (saved_out_ < 0) return;
    std::fflush(stdout);
    std::fflush(stderr);
    ::dup2(saved_out_, STDOUT_FILENO);
    ::dup2(saved_err_, STDERR_FILENO);
    for (int* fd : {&saved_out_, &saved_err_, &out_[1], &err_[1]})
      if (*fd >= 0) ::close(std::exchange(*fd, -1));
  }
  static std::string drain(int& fd) {
    std::string got;
    if (fd < 0) return got;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
    ::close(std::exchange(fd, -1));
    return got;
  }
  int saved_out_ = -1, saved_err_ = -1;
  int out_[2] = {-1, -1}, err_[2] = {-1, -1};
};

}  // namespace

TEST_CASE("a log line never continues the job's open line of text where stdout and stderr meet", "[util][log]") {
  const RestoreLogging restore;
  k3::set_log_level(LogLevel::info);
  SECTION("one destination: the text's line is ended on stderr first") {
    Redirected both(true);
    k3::set_stdout_line_open(true);
    std::fputs("According to the", stdout);
    std::fflush(stdout);
    k3::log(LogLevel::info, "storage/http", "12 ranges");
    const bool ended = k3::stdout_line_ended_by_log();
    k3::log(LogLevel::info, "", "a second line");  // the line is no longer open: no empty line
    k3::set_stdout_line_open(false);
    const auto [out, err] = both.finish();
    CHECK(out == "According to the\n[storage/http] info: 12 ranges\n[k3host] info: a second line\n");
    CHECK(ended);
  }
  SECTION("two destinations: stdout keeps exactly the text, stderr exactly the lines") {
    Redirected apart(false);
    k3::set_stdout_line_open(true);
    std::fputs("According to the", stdout);
    std::fflush(stdout);
    k3::log(LogLevel::info, "storage/http", "12 ranges");
    const bool ended = k3::stdout_line_ended_by_log();
    k3::set_stdout_line_open(false);
    const auto [out, err] = apart.finish();
    CHECK(out == "According to the");
    CHECK(err == "[storage/http] info: 12 ranges\n");
    CHECK_FALSE(ended);
  }
  SECTION("a closed line gets nothing added") {
    Redirected both(true);
    k3::set_stdout_line_open(false);
    std::fputs("a whole line\n", stdout);
    std::fflush(stdout);
    k3::log(LogLevel::info, "", "next");
    const auto [out, err] = both.finish();
    CHECK(out == "a whole line\n[k3host] info: next\n");
  }
}
