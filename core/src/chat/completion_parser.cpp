// The generated side of the format, one token at a time. After the generation prompt the
// model writes (thinking on) the think payload, boundary A
// (<|close|>think<|sep|><|open|>response<|sep|>), the response payload, <|close|>response<|sep|>,
// optionally a tools element, then <|close|>message<|sep|> and one stop id (<|end_of_msg|>
// or [EOS]). Payloads are text only: a control or other special token inside one is an
// error, because re-rendering the stored text (specials off) could never reproduce it.
#include <k3/chat.hpp>
#include <k3/error.hpp>

#include "chat/text_pieces.hpp"
#include "chat/tool_json.hpp"
#include "util/utf8.hpp"

namespace k3::chat {
namespace {

enum class Phase { think, after_think, response, after_response, tools, call, argument, after_tools, last, done };

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::think: return "the think channel";
    case Phase::after_think: return "the boundary after the think channel";
    case Phase::response: return "the response channel";
    case Phase::after_response: return "the end of the response channel";
    case Phase::tools: return "the tools element";
    case Phase::call: return "a tool call";
    case Phase::argument: return "a tool argument";
    case Phase::after_tools: return "the end of the tools element";
    case Phase::last: return "the closure of the message";
    default: return "the message";
  }
}

bool is_payload(Phase p) { return p == Phase::think || p == Phase::response || p == Phase::argument; }

}  // namespace

struct CompletionParser::State {
  const ChatTokens* tokens = nullptr;
  bool thinking = true;
  Phase phase = Phase::think;
  Channel channel = Channel::structure;
  std::size_t position = 0;  // index of the token being fed

  bool in_tag = false;  // between <|open|>/<|close|> and <|sep|>
  bool tag_opens = false;
  std::vector<std::uint32_t> tag_ids;

  std::vector<std::uint32_t> think_ids, response_ids, argument_ids;
  std::string held;  // decoded bytes of the current text channel not yet delivered

  std::vector<ToolCall> calls;
  ToolCall call;
  std::vector<detail::Argument> arguments;
  detail::Argument argument;
  bool call_has_json = false, argument_is_json = false;
  std::string json_text;
  std::uint32_t stop_id = 0;
  bool failed = false;  // a feed() was refused; the state is still the one before that token

  [[noreturn]] void fail(std::uint32_t id, const std::string& what) {
    failed = true;
    throw RuntimeError("chat: generated token " + std::to_string(position) + " (id " + std::to_string(id) +
                       "): " + what);
  }

  std::string token_text(std::uint32_t id) const {
    const std::uint32_t one[1] = {id};
    return tokens->decode(one);
  }

  // Delivers the whole UTF-8 characters of `held` (all of it at the end of a payload).
  void flush(std::vector<StreamEvent>& events, bool all) {
    const std::size_t n = all ? held.size() : util::whole_utf8_prefix(held);
    if (n == 0) return;
    events.push_back({phase == Phase::think ? StreamEvent::Kind::think_text : StreamEvent::Kind::response_text,
                      held.substr(0, n),
                      {}});
    held.erase(0, n);
  }

  void payload(std::uint32_t id, std::vector<StreamEvent>& events) {
    if (phase == Phase::argument) {
      argument_ids.push_back(id);
      channel = Channel::tools;
      return;
    }
    (phase == Phase::think ? think_ids : response_ids).push_back(id);
    channel = phase == Phase::think ? Channel::think : Channel::response;
    held += token_text(id);
    flush(events, false);
  }

  void expect(bool ok, std::uint32_t id, const std::string& want, const std::string& got) {
    if (!ok) fail(id, "expected " + want + " in " + phase_name(phase) + ", got " + got);
  }

  void on_tag(std::uint32_t sep_id, const std::string& text, std::vector<StreamEvent>& events) {
    const std::string got = std::string(tag_opens ? "<|open|>" : "<|close|>") + text + "<|sep|>";
    auto is = [&](bool opens, std::string_view name) { return tag_opens == opens && text == name; };
    switch (phase) {
      case Phase::think:
        expect(is(false, "think"), sep_id, "<|close|>think<|sep|>", got);
        phase = Phase::after_think;
        break;
      case Phase::after_think:
        expect(is(true, "response"), sep_id, "<|open|>response<|sep|>", got);
        phase = Phase::response;
        break;
      case Phase::response:
        expect(is(false, "response"), sep_id, "<|close|>response<|sep|>", got);
        phase = Phase::after_response;
        break;
      case Phase::after_response:
        expect(is(true, "tools") || is(false, "message"), sep_id, "<|open|>tools<|sep|> or <|close|>message<|sep|>",
               got);
        phase = tag_opens ? Phase::tools : Phase::last;
        break;
      case Phase::tools:
        if (is(false, "tools")) {
          phase = Phase::after_tools;
          break;
        }
        open_call(sep_id, text, got);
        break;
      case Phase::call:
        if (is(false, "call")) {
          close_call(sep_id, events);
          break;
        }
        open_argument(sep_id, text, got);
        break;
      case Phase::argument: {
        const char* name = argument_is_json ? "json" : "argument";
        expect(is(false, name), sep_id, std::string("<|close|>") + name + "<|sep|>", got);
        const std::string value = tokens->decode(argument_ids);
        argument_ids.clear();
        if (argument_is_json) {
          json_text = value;
        } else {
          argument.text = value;
          arguments.push_back(argument);
        }
        phase = Phase::call;
        break;
      }
      case Phase::after_tools:
        expect(is(false, "message"), sep_id, "<|close|>message<|sep|>", got);
        phase = Phase::last;
        break;
      default: fail(sep_id, "unexpected tag " + got);
    }
  }

  void open_call(std::uint32_t id, const std::string& text, const std::string& got) {
    const auto h = detail::parse_tag_header(text);
    const std::string index = std::to_string(calls.size() + 1);
    const bool ok = tag_opens && h && h->name == "call" && h->attributes.size() == 2 &&
                    h->attributes[0].first == "tool" && !h->attributes[0].second.empty() &&
                    h->attributes[1].first == "index" && h->attributes[1].second == index;
    expect(ok, id, "<|open|>call tool=\"...\" index=\"" + index + "\"<|sep|> or <|close|>tools<|sep|>", got);
    call = ToolCall{};
    call.name = h->attributes[0].second;
    arguments.clear();
    call_has_json = false;
    phase = Phase::call;
  }

  void open_argument(std::uint32_t id, const std::string& text, const std::string& got) {
    static const char* kTypes[] = {"string", "number", "boolean", "null", "object", "array"};
    const auto h = detail::parse_tag_header(text);
    bool ok = false;
    if (tag_opens && h && !call_has_json) {
      if (h->name == "argument" && h->attributes.size() == 2 && h->attributes[0].first == "key" &&
          h->attributes[1].first == "type") {
        for (const char* t : kTypes) ok = ok || h->attributes[1].second == t;
        argument = {h->attributes[0].second, h->attributes[1].second, {}};
        argument_is_json = false;
      } else if (h->name == "json" && arguments.empty() && h->attributes.size() == 1 &&
                 h->attributes[0] == std::pair<std::string, std::string>{"type", "object"}) {
        ok = true;
        argument_is_json = call_has_json = true;
      }
    }
    expect(
        ok, id,
        "<|open|>argument key=\"...\" type=\"...\"<|sep|>, <|open|>json type=\"object\"<|sep|> or <|close|>call<|sep|>",
        got);
    phase = Phase::argument;
  }

  void close_call(std::uint32_t id, std::vector<StreamEvent>& events) {
    if (call_has_json) {
      call.arguments = json_text;
    } else {
      try {
        call.arguments = detail::join_arguments(arguments);
      } catch (const std::exception& e) {
        fail(id, std::string("tool call ") + call.name + ": " + e.what());
      }
    }
    calls.push_back(call);
    events.push_back({StreamEvent::Kind::tool_call, {}, call});
    phase = Phase::tools;
  }

  std::vector<StreamEvent> feed(std::uint32_t id) {
    std::vector<StreamEvent> events;
    if (failed) throw RuntimeError("chat: the completion parser already failed");
    if (phase == Phase::done) fail(id, "a token after the end of the message");
    const bool control = id == tokens->open || id == tokens->close;
    if (in_tag) {
      channel = Channel::structure;
      if (id == tokens->sep) {
        on_tag(id, tokens->decode(tag_ids), events);  // first: a refused tag leaves in_tag set
        in_tag = false;
      } else if (control || id == tokens->sep || tokens->is_special(id)) {
        fail(id, "special token " + token_text(id) + " inside a tag header");
      } else {
        tag_ids.push_back(id);
      }
    } else if (phase == Phase::last) {
      channel = Channel::structure;
      if (!tokens->is_stop(id))
        fail(id, "expected <|end_of_msg|> or [EOS] after <|close|>message<|sep|>, got " + token_text(id));
      stop_id = id;
      phase = Phase::done;
      events.push_back({StreamEvent::Kind::done, {}, {}});
    } else if (is_payload(phase)) {
      if (id == tokens->close) {
        if (phase != Phase::argument) flush(events, true);
        begin_tag(false);
      } else if (control || id == tokens->sep || tokens->is_special(id)) {
        fail(id, "special token " + token_text(id) + " inside " + phase_name(phase) +
                     (tokens->is_stop(id) ? " (the message ended before its closure)" : ""));
      } else {
        payload(id, events);
      }
    } else {
      channel = Channel::structure;
      if (!control)
        fail(id, std::string("expected <|open|> or <|close|> in ") + phase_name(phase) + ", got " + token_text(id));
      begin_tag(id == tokens->open);
    }
    ++position;
    return events;
  }

  void begin_tag(bool opens) {
    in_tag = true;
    tag_opens = opens;
    tag_ids.clear();
    channel = Channel::structure;
  }
};

CompletionParser::CompletionParser(const ChatTokens& tokens, bool thinking) : state_(std::make_unique<State>()) {
  state_->tokens = &tokens;
  state_->thinking = thinking;
  state_->phase = thinking ? Phase::think : Phase::response;
}

CompletionParser::~CompletionParser() = default;
CompletionParser::CompletionParser(CompletionParser&&) noexcept = default;
CompletionParser& CompletionParser::operator=(CompletionParser&&) noexcept = default;

std::vector<StreamEvent> CompletionParser::feed(std::uint32_t id) { return state_->feed(id); }

bool CompletionParser::done() const { return state_->phase == Phase::done; }

CompletionParser::Channel CompletionParser::channel() const { return state_->channel; }

bool CompletionParser::in_think() const { return state_->thinking && state_->phase == Phase::think; }

std::vector<Segment> CompletionParser::closing() const {
  const State& s = *state_;
  std::vector<Segment> out;
  auto tag = [&](std::string_view control, std::string_view name) {
    out.push_back({std::string(control), true});
    out.push_back({std::string(name), false});
    out.push_back({"<|sep|>", true});
  };
  Phase p = s.phase;
  if (p == Phase::done) return out;
  if (s.in_tag) {
    // The header being written: finished when it is the start of a tag on the way out (the
    // rest of the name, then <|sep|>), else ended as it stands (a call or argument header).
    struct Way {
      bool opens;
      std::string_view name;
      Phase next;
    };
    std::vector<Way> ways;
    switch (p) {
      case Phase::think: ways = {{false, "think", Phase::after_think}}; break;
      case Phase::after_think: ways = {{true, "response", Phase::response}}; break;
      case Phase::response: ways = {{false, "response", Phase::after_response}}; break;
      case Phase::after_response: ways = {{false, "message", Phase::last}, {true, "tools", Phase::tools}}; break;
      case Phase::tools: ways = {{false, "tools", Phase::after_tools}}; break;
      case Phase::call: ways = {{false, "call", Phase::tools}}; break;
      case Phase::argument: ways = {{false, s.argument_is_json ? "json" : "argument", Phase::call}}; break;
      case Phase::after_tools: ways = {{false, "message", Phase::last}}; break;
      default: break;
    }
    const std::string text = s.tokens->decode(s.tag_ids);
    for (const Way& w : ways) {
      if (w.opens != s.tag_opens || w.name.substr(0, text.size()) != text) continue;
      if (text.size() < w.name.size()) out.push_back({std::string(w.name.substr(text.size())), false});
      p = w.next;
      break;
    }
    out.push_back({"<|sep|>", true});
  }
  // Each phase's way out, in the order the format nests them.
  while (p != Phase::done) {
    switch (p) {
      case Phase::think:
        tag("<|close|>", "think");
        p = Phase::after_think;
        break;
      case Phase::after_think:
        tag("<|open|>", "response");
        p = Phase::response;
        break;
      case Phase::response:
        tag("<|close|>", "response");
        p = Phase::after_response;
        break;
      case Phase::argument:
        tag("<|close|>", s.argument_is_json ? "json" : "argument");
        p = Phase::call;
        break;
      case Phase::call:
        tag("<|close|>", "call");
        p = Phase::tools;
        break;
      case Phase::tools:
        tag("<|close|>", "tools");
        p = Phase::after_tools;
        break;
      case Phase::after_response:
      case Phase::after_tools:
        tag("<|close|>", "message");
        p = Phase::last;
        break;
      case Phase::last:
        out.push_back({"<|end_of_msg|>", true});
        p = Phase::done;
        break;
      case Phase::done: break;
    }
  }
  return out;
}

Completion CompletionParser::result() const {
  const State& s = *state_;
  Completion c;
  if (s.thinking) c.reasoning_content = s.tokens->decode(s.think_ids);
  c.content = s.tokens->decode(s.response_ids);
  c.tool_calls = s.calls;
  c.stop_id = s.stop_id;
  return c;
}

}  // namespace k3::chat
