// A reply token by token, as the client sees it: for chat, the K3 parser's events (think
// text, response text, tool calls) or, once the model wrote something the format does not
// allow, the raw text of the rest as content; for text completions, the decoded text. Both
// apply the request's stop strings. Moved out of the HTTP side so that the generation
// engine can run several of them later.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <k3/chat.hpp>
#include <k3/runtime.hpp>

#include "serve/engine.hpp"
#include "serve/request.hpp"

namespace k3::serve {

class ChatOutput {
 public:
  ChatOutput(const Engine& engine, bool thinking, std::vector<std::string> stops)
      : engine_(engine), parser_(engine.chat_tokens(), thinking), stop_(std::move(stops)), thinking_(thinking) {}

  struct Delta {
    std::string reasoning, content;
    std::vector<chat::ToolCall> calls;
  };

  Delta push(std::uint32_t id);
  /// The rest at the end of generation.
  Delta flush();

  [[nodiscard]] bool stopped() const noexcept { return stop_.stopped(); }
  [[nodiscard]] bool thinking() const noexcept { return thinking_; }
  /// The reply stopped inside the think channel (a token limit reached before the model
  /// closed it): all of it is reasoning. The response says so (docs/serve.md, "Responses").
  [[nodiscard]] bool in_reasoning() const { return !raw_ && parser_.in_think(); }

  std::string reasoning, content;
  std::vector<chat::ToolCall> calls;

 private:
  Delta finish_delta(Delta& d);
  const Engine& engine_;
  chat::CompletionParser parser_;
  StopMatcher stop_;
  bool thinking_;
  bool raw_ = false;
  std::vector<std::uint32_t> raw_ids_;
  std::size_t raw_printed_ = 0;
};

/// A text completion's reply: the decoded text, less the EOS, up to a stop string.
class TextOutput {
 public:
  TextOutput(Runtime& rt, std::vector<std::string> stops, std::uint32_t eos_id)
      : text_(rt), stop_(std::move(stops)), eos_(eos_id) {}
  std::string push(std::uint32_t id);
  std::string flush();
  [[nodiscard]] bool stopped() const noexcept { return stop_.stopped(); }
  std::string all;

 private:
  TextStream text_;
  StopMatcher stop_;
  std::uint32_t eos_;
};

}  // namespace k3::serve
