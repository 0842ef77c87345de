// What every harness shares (docs/testing.md, "Fuzzing"): the contract that a parser either
// accepts its input or refuses it with one of the documented exceptions, and small helpers
// to split one fuzz input into the several pieces a parser reads.
//
// A documented refusal (k3::Error and its subclasses UsageError / RuntimeError, or what the
// harness names as its parser's own refusal type) returns normally. Anything else — another
// exception type, an assertion of the harness's oracle — prints what it was and aborts, so
// libFuzzer (and the replay main) report it as a finding with the input that caused it.
#pragma once
#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <typeinfo>
#include <vector>

#include <k3/error.hpp>

namespace k3::fuzz {

/// A broken oracle: the harness found a result the parser must never give.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "k3 fuzz finding: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

inline void check(bool ok, const std::string& what) {
  if (!ok) finding(what);
}

/// K3_FUZZ_SHOW=1 prints each refusal and acceptance (to check what a seed reaches).
inline void show(const char* what, const char* detail) {
  static const bool on = std::getenv("K3_FUZZ_SHOW") != nullptr;
  if (on) std::fprintf(stderr, "  %s: %s\n", what, detail);
}

/// Runs `body`; k3::Error (and each `Refusal...` type) is a clean refusal, any other
/// exception a finding.
template <class... Refusal, class Body>
void guarded(Body&& body) {
  try {
    try {
      body();
      show("accepted", "");
    } catch (const k3::Error& e) {
      show("refused", e.what());  // documented refusal
    }
  } catch (const std::exception& e) {
    if ((dynamic_cast<const Refusal*>(&e) || ...)) {
      show("refused", e.what());
      return;
    }
    finding(std::string("undocumented exception ") + typeid(e).name() + ": " + e.what());
  } catch (...) {
    finding("an exception that is not a std::exception");
  }
}

/// The input as text.
inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// Splits `text` at every occurrence of `sep` (at most `max_parts` parts; the last one
/// keeps the rest).
inline std::vector<std::string_view> split(std::string_view text, std::string_view sep, std::size_t max_parts) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < max_parts) {
    const auto at = text.find(sep);
    if (at == std::string_view::npos) break;
    out.push_back(text.substr(0, at));
    text.remove_prefix(at + sep.size());
  }
  out.push_back(text);
  return out;
}

/// A folder of this process's own under the temporary directory, removed at exit: for
/// parsers that k3host hands a path (pipelines, state files, traces).
class ScratchDir {
 public:
  ScratchDir() {
    const char* base = std::getenv("TMPDIR");
    dir_ = std::filesystem::path(base && *base ? base : "/tmp") /
           ("k3fuzz-" + std::to_string(static_cast<long>(::getpid())));
    std::filesystem::create_directories(dir_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  /// Writes `bytes` to `name` inside the folder (replacing it) and returns its path.
  [[nodiscard]] std::filesystem::path write(const std::string& name, std::string_view bytes) const {
    const auto path = dir_ / name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) finding("the harness cannot write " + path.string());
    return path;
  }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return dir_; }

 private:
  std::filesystem::path dir_;
};

inline ScratchDir& scratch() {
  static ScratchDir dir;
  return dir;
}

}  // namespace k3::fuzz
