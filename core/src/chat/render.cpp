// A conversation rendered as K3's reference encoder renders it (docs/chat.md, "The K3 chat
// format"): tool declaration, thinking effort, the messages, tool choice, the generation
// prompt.
#include <algorithm>
#include <map>
#include <stdexcept>

#include <k3/chat.hpp>
#include <k3/error.hpp>

#include "chat/tool_json.hpp"
#include "chat/xtml.hpp"

namespace k3::chat {
namespace {

using detail::Attributes;
using detail::SegmentWriter;

// The effort prompt, one text segment: cutting it around the value would change the ids.
std::string effort_prompt(Effort effort) {
  return "`thinking_effort` guides on how much to think in your thinking channel (not including the response "
         "channel), supported values include `low`, `medium`, `high`, and `max`.\nNow the system is invoked with "
         "`thinking_effort=" +
         std::string(to_string(effort)) + "`.";
}

Attributes role_attributes(const Message& m) {
  Attributes a{{"role", std::string(role_name(m.role))}};
  if (!m.name.empty()) a.emplace_back("name", m.name);
  return a;
}

// Tool results answer the calls of the assistant message before them. When every result of
// a run names a call id of that message, the run is put in call order and each result takes
// its call's function name (the reference's normalisation); otherwise it stays as given.
std::vector<Message> results_in_call_order(std::span<const Message> messages) {
  std::vector<Message> out(messages.begin(), messages.end());
  std::map<std::string, std::pair<std::size_t, std::string>> calls;  // id -> (position, name)
  for (std::size_t i = 0; i < out.size();) {
    if (out[i].role == Role::assistant) {
      calls.clear();
      for (std::size_t c = 0; c < out[i].tool_calls.size(); ++c) {
        const ToolCall& call = out[i].tool_calls[c];
        if (!call.id.empty()) calls.emplace(call.id, std::make_pair(c, call.name));  // first wins
      }
    }
    if (out[i].role != Role::tool) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < out.size() && out[end].role == Role::tool) ++end;
    const bool all_matched = std::all_of(out.begin() + static_cast<std::ptrdiff_t>(i),
                                         out.begin() + static_cast<std::ptrdiff_t>(end),
                                         [&](const Message& m) { return calls.count(m.tool_call_id) > 0; });
    if (all_matched) {
      std::stable_sort(out.begin() + static_cast<std::ptrdiff_t>(i), out.begin() + static_cast<std::ptrdiff_t>(end),
                       [&](const Message& a, const Message& b) {
        return calls.at(a.tool_call_id).first < calls.at(b.tool_call_id).first;
      });
      for (std::size_t k = i; k < end; ++k) out[k].name = calls.at(out[k].tool_call_id).second;
    }
    i = end;
  }
  return out;
}

void render_tool_call(SegmentWriter& w, const ToolCall& call, std::size_t index) {
  w.open("call", {{"tool", call.name}, {"index", std::to_string(index)}});
  if (const auto arguments = detail::split_arguments(call.arguments)) {
    for (const auto& a : *arguments) {
      w.open("argument", {{"key", a.key}, {"type", a.type}});
      w.text(a.text);
      w.close("argument");
    }
  } else {
    w.open("json", {{"type", "object"}});
    w.text(call.arguments);
    w.close("json");
  }
  w.close("call");
}

void render_assistant(SegmentWriter& w, const Message& m, bool thinking) {
  w.open("message", role_attributes(m));
  if (thinking) {  // the think element is there even when empty
    w.open("think");
    w.text(m.reasoning_content);
    w.close("think");
  }
  w.open("response");
  w.text(m.content);
  w.close("response");
  if (!m.tool_calls.empty()) {
    w.open("tools");
    for (std::size_t c = 0; c < m.tool_calls.size(); ++c) render_tool_call(w, m.tool_calls[c], c + 1);
    w.close("tools");
  }
  w.end_message();
}

}  // namespace

Effort parse_effort(std::string_view text) {
  if (text == "low") return Effort::low;
  if (text == "high") return Effort::high;
  if (text == "max") return Effort::max;
  if (text == "medium")
    throw UsageError("thinking effort 'medium': K3's official encoder refuses it (use low, high or max)");
  throw UsageError("thinking effort '" + std::string(text) + "': expected low, high or max");
}

std::string_view to_string(Effort effort) {
  switch (effort) {
    case Effort::low: return "low";
    case Effort::high: return "high";
    case Effort::max: return "max";
  }
  return "max";
}

std::vector<Segment> render(std::span<const Message> messages, const RenderOptions& options) {
  SegmentWriter w;
  std::string tools;
  if (!options.tools.empty()) {
    try {
      tools = detail::declared_tools(options.tools);
    } catch (const std::exception& e) {
      throw UsageError(std::string("chat tools: ") + e.what());
    }
  }
  if (!tools.empty()) {
    w.open("message", {{"role", "system"}, {"type", "tool-declare"}});
    w.text("# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n" + tools + "\n```");
    w.end_message();
  }
  if (options.thinking) w.internal_system_message("thinking-effort", effort_prompt(options.effort));

  const std::vector<Message> ordered = results_in_call_order(messages);
  const Message* last_assistant = nullptr;
  std::size_t tool_index = 0;
  for (std::size_t i = 0; i < ordered.size(); ++i) {
    const Message& m = ordered[i];
    switch (m.role) {
      case Role::system:
      case Role::user:
        w.open("message", role_attributes(m));
        w.text(m.content);
        w.end_message();
        break;
      case Role::assistant:
        last_assistant = &m;
        tool_index = 0;
        render_assistant(w, m, options.thinking);
        break;
      case Role::tool: {
        ++tool_index;
        std::string name = m.name;
        if (name.empty() && last_assistant != nullptr && tool_index <= last_assistant->tool_calls.size())
          name = last_assistant->tool_calls[tool_index - 1].name;
        if (name.empty())
          throw UsageError("chat message " + std::to_string(i) +
                           ": a tool result needs the tool's name, or a call at its position in the assistant "
                           "message before it");
        w.open("message", {{"role", "tool"}, {"tool", name}, {"index", std::to_string(tool_index)}});
        w.text(m.content);
        w.end_message();
        break;
      }
    }
  }

  if (options.tool_choice == ToolChoice::required)
    w.internal_system_message(
        "tool-choice", "The system is invoked with `tool_choice=required`.\nYou MUST call tools in the next message.");
  if (options.tool_choice == ToolChoice::none)
    w.internal_system_message(
        "tool-choice",
        "The system is invoked with `tool_choice=none`.\nYou MUST NOT call any tools in the next message.");

  if (options.generation_prompt) {
    w.open("message", {{"role", "assistant"}});
    w.open(options.thinking ? "think" : "response");
  }
  return w.take();
}

std::string_view role_name(Role r) noexcept {
  switch (r) {
    case Role::system: return "system";
    case Role::user: return "user";
    case Role::assistant: return "assistant";
    case Role::tool: return "tool";
  }
  return "user";
}

std::optional<Role> parse_role(std::string_view name) noexcept {
  for (const Role r : {Role::system, Role::user, Role::assistant, Role::tool})
    if (role_name(r) == name) return r;
  return std::nullopt;
}

}  // namespace k3::chat
