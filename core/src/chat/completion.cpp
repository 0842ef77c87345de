// A whole completion: the incremental parser run to its end, payloads decoded in one piece.
#include <k3/chat.hpp>
#include <k3/error.hpp>

namespace k3::chat {

Completion parse_completion(const ChatTokens& tokens, std::span<const std::uint32_t> ids, bool thinking) {
  CompletionParser parser(tokens, thinking);
  for (std::uint32_t id : ids) (void)parser.feed(id);
  if (!parser.done())
    throw RuntimeError("chat: the completion ends after " + std::to_string(ids.size()) +
                       " tokens, before its closure (<|close|>message<|sep|> and <|end_of_msg|> or [EOS])");
  return parser.result();
}

Message to_message(const Completion& completion) {
  Message m;
  m.role = Role::assistant;
  m.content = completion.content;
  m.reasoning_content = completion.reasoning_content.value_or("");
  m.tool_calls = completion.tool_calls;
  return m;
}

}  // namespace k3::chat
