// The K3 chat format (docs/chat.md): conversations rendered to the segments K3 was trained
// on, segments encoded to ids, and the ids the model generates parsed back into a message,
// whole or one token at a time.
//
// K3 ships no chat template string. Its format ("XTML") is built from four control tokens:
// <|open|>tag attrs<|sep|> opens an element, <|close|>tag<|sep|> closes it, and
// <|end_of_msg|> ends a message. Rendering produces SEGMENTS: control tokens are encoded with
// special-token parsing on, everything else (tag names, attributes, user text) with it off,
// each segment on its own, so BPE never merges across segments and text a user types can
// never become a control token.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <k3/tokenizer.hpp>

namespace k3::chat {

enum class Role { system, user, assistant, tool };
/// "system", "user", "assistant" or "tool": the role as the K3 format and the history file
/// write it.
std::string_view role_name(Role role) noexcept;
/// The role role_name() writes as `name`; nullopt for any other text.
std::optional<Role> parse_role(std::string_view name) noexcept;

/// One tool call of an assistant message (OpenAI's shape).
struct ToolCall {
  std::string id;         ///< the caller's call id; matched by tool results, never rendered
  std::string name;       ///< the function name
  std::string arguments;  ///< JSON text of an object, as OpenAI sends it; "" = no arguments
  bool operator==(const ToolCall&) const = default;
};

struct Message {
  Message() = default;
  Message(Role r, std::string text) : role(r), content(std::move(text)) {}

  Role role = Role::user;
  std::string content;
  /// system/user/assistant: an optional name attribute. tool: the tool's name; when empty it
  /// is taken from the preceding assistant message's call at the same position.
  std::string name;
  std::string reasoning_content;     ///< assistant: the think channel (dropped with thinking off)
  std::vector<ToolCall> tool_calls;  ///< assistant
  std::string tool_call_id;          ///< tool: the id of the call this result answers
  bool operator==(const Message&) const = default;
};

/// How much the model thinks. "medium" appears in K3's own effort prompt but the official
/// encoder refuses it, so it is refused here too.
enum class Effort { low, high, max };
/// "low", "high" or "max"; UsageError for anything else (naming "medium" specially).
Effort parse_effort(std::string_view text);
std::string_view to_string(Effort effort);

enum class ToolChoice { automatic, required, none };

struct RenderOptions {
  bool thinking = true;
  Effort effort = Effort::max;  ///< ignored with thinking off
  /// The OpenAI "tools" array as JSON text; empty (or "[]") declares no tools.
  std::string tools;
  ToolChoice tool_choice = ToolChoice::automatic;
  /// End with the opening of the assistant's reply (its think channel, or its response
  /// channel with thinking off), ready for generation.
  bool generation_prompt = true;
};

struct Segment {
  std::string text;
  bool allow_special = false;  ///< true only for the four control tokens
  bool operator==(const Segment&) const = default;
};

/// The segments of a conversation. UsageError for what K3 cannot express (a tool result
/// whose tool cannot be named, tools that are not a JSON array).
std::vector<Segment> render(std::span<const Message> messages, const RenderOptions& options = {});

/// The K3 control tokens of one tokenizer, looked up by text (the checkpoint's
/// tokenizer_config.json), and the encoding of segments with it. The tokenizer must outlive
/// this object; it is used from the calling thread only.
class ChatTokens {
 public:
  /// UsageError when the tokenizer lacks <|open|>, <|close|>, <|sep|> or <|end_of_msg|>.
  explicit ChatTokens(sdk::Tokenizer& tokenizer);

  std::uint32_t open = 0, close = 0, sep = 0, end_of_msg = 0;
  std::optional<std::uint32_t> eos;  ///< [EOS]: the released model also ends turns with it

  /// Each segment encoded on its own and appended in order. A control segment must encode
  /// to exactly its one special id (RuntimeError otherwise).
  [[nodiscard]] std::vector<std::uint32_t> encode(std::span<const Segment> segments) const;
  /// The ids that end a generated message: <|end_of_msg|> and [EOS] when present.
  [[nodiscard]] std::vector<std::uint32_t> stop_ids() const;
  [[nodiscard]] bool is_stop(std::uint32_t id) const;
  /// True for any added/special token (control or not): its decoded text maps back to it.
  [[nodiscard]] bool is_special(std::uint32_t id) const;
  /// The bytes of ids (RuntimeError for an id outside the vocabulary).
  [[nodiscard]] std::string decode(std::span<const std::uint32_t> ids) const;
  [[nodiscard]] sdk::Tokenizer& tokenizer() const { return *tok_; }

 private:
  sdk::Tokenizer* tok_;
};

/// A parsed assistant completion.
struct Completion {
  std::optional<std::string> reasoning_content;  ///< the think channel; nullopt with thinking off
  std::string content;                           ///< the response channel
  std::vector<ToolCall> tool_calls;              ///< ids left empty: the caller names calls
  std::uint32_t stop_id = 0;                     ///< <|end_of_msg|> or [EOS]
};

/// Parses the ids generated after the generation prompt, through the final stop id.
/// RuntimeError naming the token index for anything K3's format does not allow: a control
/// token inside a payload, a missing closure, anything after the stop id.
Completion parse_completion(const ChatTokens& tokens, std::span<const std::uint32_t> ids, bool thinking);

/// The assistant message for the conversation history.
Message to_message(const Completion& completion);

/// What one generated token produced.
struct StreamEvent {
  enum class Kind { think_text, response_text, tool_call, done };
  Kind kind = Kind::done;
  /// think_text/response_text: new bytes, whole UTF-8 characters (bytes still incomplete when
  /// the payload closes are sent as they are: the model wrote invalid UTF-8)
  std::string text;
  ToolCall call;  ///< tool_call: a call, complete when its element closes
  bool operator==(const StreamEvent&) const = default;
};

/// The incremental form of parse_completion for terminals and servers: feed the generated
/// ids one at a time and show each event as it comes. Text deltas hold back a UTF-8
/// character split across tokens until it is whole. A format error throws RuntimeError
/// (as parse_completion would); feeding after `done` is such an error.
class CompletionParser {
 public:
  CompletionParser(const ChatTokens& tokens, bool thinking);
  ~CompletionParser();
  CompletionParser(CompletionParser&&) noexcept;
  CompletionParser& operator=(CompletionParser&&) noexcept;
  std::vector<StreamEvent> feed(std::uint32_t id);
  [[nodiscard]] bool done() const;
  /// The channel the last token belonged to: think, response, tools, or none (structure).
  enum class Channel { think, response, tools, structure };
  [[nodiscard]] Channel channel() const;
  /// The think channel is still open (thinking on, its <|close|>think not written yet): a
  /// completion cut here holds reasoning and no answer.
  [[nodiscard]] bool in_think() const;
  /// The whole-payload decode so far (think channel, response channel), independent of the
  /// deltas: what parse_completion returns.
  [[nodiscard]] Completion result() const;
  /// The segments that end the message from where the parser stands, for a completion cut
  /// short (a stop request, the token limit, a token the format does not allow): each open
  /// element is closed in order (think, then an empty response, then any tools element),
  /// then <|close|>message<|sep|> and <|end_of_msg|>; empty once done(). A tag header the
  /// model left unfinished is finished when its text so far starts a tag on that way out
  /// (the rest of the name, then <|sep|>); any other (a call or argument header) is ended
  /// with <|sep|> as it stands, which the format does not allow. After a failed feed() it
  /// answers for the tokens before the one refused, which was not taken in.
  [[nodiscard]] std::vector<Segment> closing() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace k3::chat
