// OpenAI request bodies to k3host's types, and OpenAI-style errors. Every parameter the
// server honours is read here; a parameter it cannot honour is refused (400 naming it),
// never ignored (docs/serve.md, "Parameters").
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <k3/chat.hpp>
#include <k3/generate.hpp>

namespace k3::serve {

/// A request the server answers with an error: the HTTP status and OpenAI's error object
/// {"error":{"message","type","param","code"}} (param and code null when empty).
class ApiError : public std::runtime_error {
 public:
  ApiError(int http_status, const std::string& message, std::string error_type = "invalid_request_error",
           std::string error_param = {}, std::string error_code = {})
      : std::runtime_error(message),
        status(http_status),
        type(std::move(error_type)),
        param(std::move(error_param)),
        code(std::move(error_code)) {}
  int status;
  std::string type, param, code;
};

/// The JSON body of an error response.
std::string error_body(const ApiError& e);

/// What both endpoints share.
struct GenParams {
  std::int64_t max_tokens = 0;    ///< max_tokens / max_completion_tokens, >= 1
  SamplingSettings sampling;      ///< temperature (default 1), top_p (default 1), seed (default 0)
  std::vector<std::string> stop;  ///< up to 4 non-empty strings
  bool stream = false;
  bool include_usage = false;  ///< stream_options.include_usage
};

struct ChatRequest {
  GenParams gen;
  std::vector<chat::Message> messages;
  chat::RenderOptions render;  ///< tools, tool_choice, thinking/effort from reasoning_effort (or the model's default)
};

struct CompletionRequest {
  GenParams gen;
  std::string prompt;                     ///< a text prompt (encoded without special tokens)
  std::vector<std::uint32_t> prompt_ids;  ///< or token ids
  bool ids_given = false;
};

/// ApiError 400 for malformed JSON, a wrong type, an out-of-range or unsupported parameter
/// (naming it in `param`), an unknown one. `thinking` is the model's default (Runtime::thinking):
/// a chat request without reasoning_effort gets it; "none" turns thinking off, an effort on.
ChatRequest parse_chat_request(std::string_view body, std::int64_t default_max_tokens, bool thinking = true);
CompletionRequest parse_completion_request(std::string_view body, std::int64_t default_max_tokens);

/// Stop sequences over streamed text: push() returns the text that can be shown now,
/// holding back a tail that might be the start of a stop string; once one is found the text
/// ends just before it and stopped() turns true.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  std::string push(std::string_view text);
  /// What was held back (at the end of generation).
  std::string flush();
  [[nodiscard]] bool stopped() const noexcept { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace k3::serve
