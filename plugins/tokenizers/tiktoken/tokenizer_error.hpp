// The one exception type inside the tiktoken plugin. It never crosses the plugin boundary:
// TiktokenTokenizer's noexcept members and the factory turn it into a k3::sdk::Status.
#pragma once
#include <stdexcept>
#include <string>

#include <k3/status.hpp>

namespace k3::tiktoken {

class TokenizerError : public std::runtime_error {
 public:
  TokenizerError(sdk::StatusCode code, const std::string& detail) : std::runtime_error(detail), code_(code) {}
  [[nodiscard]] sdk::StatusCode code() const noexcept { return code_; }

 private:
  sdk::StatusCode code_;
};

[[noreturn]] inline void fail(sdk::StatusCode code, const std::string& detail) { throw TokenizerError(code, detail); }

}  // namespace k3::tiktoken
