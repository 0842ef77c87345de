#include "serve/request.hpp"

#include <cmath>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include <k3/error.hpp>
#include <k3/json_depth.hpp>

namespace k3::serve {

using json = nlohmann::json;

std::string error_body(const ApiError& e) {
  json err = {{"message", e.what()},
              {"type", e.type},
              {"param", e.param.empty() ? json(nullptr) : json(e.param)},
              {"code", e.code.empty() ? json(nullptr) : json(e.code)}};
  return json{{"error", err}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

/// The largest max_tokens a request may give: int64's maximum.
constexpr std::uint64_t kMaxTokensBound = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiError(400, message, "invalid_request_error", param);
}

json parse_body(std::string_view body) {
  // Before the parse: a value nested without bound would overflow the stack of every
  // recursive walk over it (nlohmann's serializer, its comparisons and copies).
  if (const auto deep = sdk::json_too_deep(body))
    throw ApiError(400,
                   "The JSON body of your request is nested deeper than " + std::to_string(sdk::kMaxJsonDepth) +
                       " levels (at byte " + std::to_string(*deep) + ").",
                   "invalid_request_error", "", "invalid_json");
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    throw ApiError(400, "We could not parse the JSON body of your request: it is not valid JSON.",
                   "invalid_request_error", "", "invalid_json");
  if (!j.is_object()) throw ApiError(400, "The request body must be a JSON object.", "invalid_request_error");
  return j;
}

std::string get_string(const json& j, const std::string& where) {
  if (!j.is_string()) bad(where, "'" + where + "' must be a string");
  return j.get<std::string>();
}

double get_number(const json& j, const std::string& param, double lo, double hi) {
  if (!j.is_number()) bad(param, "'" + param + "' must be a number");
  const double v = j.get<double>();
  if (!(v >= lo && v <= hi))
    bad(param, "'" + param + "' must be between " + json(lo).dump() + " and " + json(hi).dump() + ", got " + j.dump());
  return v;
}

/// The parameters both endpoints share; `seen` collects the keys read.
GenParams read_gen(const json& j, std::int64_t default_max_tokens, std::set<std::string>& seen, bool chat) {
  GenParams g;
  g.max_tokens = default_max_tokens;
  g.sampling.temperature = 1.0;  // OpenAI's defaults
  g.sampling.top_p = 1.0;
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!j.contains(key)) continue;
    seen.insert(key);
    const json& v = j[key];
    if (v.is_null()) continue;
    // A reply is also capped by the room the context leaves (memory.context); beyond
    // int64 the value cannot be held, so that is the bound named.
    const bool in_range = v.is_number_unsigned()
                              ? v.get<std::uint64_t>() >= 1 && v.get<std::uint64_t>() <= kMaxTokensBound
                          : v.is_number_integer() ? v.get<std::int64_t>() >= 1
                                                  : false;
    if (!in_range)
      bad(key, std::string("'") + key + "' must be an integer from 1 to " + std::to_string(kMaxTokensBound) +
                   " (the reply is also capped by the room left in the context, memory.context); got " + v.dump());
    g.max_tokens = v.get<std::int64_t>();
  }
  if (!chat && !j.contains("max_tokens"))
    g.max_tokens = std::min<std::int64_t>(16, default_max_tokens);  // OpenAI's default
  if (j.contains("temperature") && !j["temperature"].is_null())
    g.sampling.temperature = get_number(j["temperature"], "temperature", 0, 2);
  if (j.contains("top_p") && !j["top_p"].is_null()) {
    g.sampling.top_p = get_number(j["top_p"], "top_p", 0, 1);
    if (g.sampling.top_p <= 0) bad("top_p", "'top_p' must be greater than 0");
  }
  if (j.contains("seed") && !j["seed"].is_null()) {
    if (!j["seed"].is_number_integer()) bad("seed", "'seed' must be an integer");
    g.sampling.seed = static_cast<std::uint64_t>(j["seed"].get<std::int64_t>());
  }
  if (j.contains("stop") && !j["stop"].is_null()) {
    const json& s = j["stop"];
    if (s.is_string()) {
      g.stop.push_back(s.get<std::string>());
    } else if (s.is_array()) {
      for (const auto& x : s) {
        if (!x.is_string()) bad("stop", "'stop' must be a string or an array of strings");
        g.stop.push_back(x.get<std::string>());
      }
    } else {
      bad("stop", "'stop' must be a string or an array of strings");
    }
    if (g.stop.size() > 4) bad("stop", "'stop' holds at most 4 sequences");
    for (const auto& x : g.stop)
      if (x.empty()) bad("stop", "'stop' sequences must not be empty");
  }
  if (j.contains("stream") && !j["stream"].is_null()) {
    if (!j["stream"].is_boolean()) bad("stream", "'stream' must be a boolean");
    g.stream = j["stream"].get<bool>();
  }
  if (j.contains("stream_options") && !j["stream_options"].is_null()) {
    const json& so = j["stream_options"];
    if (!so.is_object()) bad("stream_options", "'stream_options' must be an object");
    for (const auto& [k, v] : so.items()) {
      if (k != "include_usage") bad("stream_options." + k, "unknown parameter 'stream_options." + k + "'");
      if (!v.is_boolean()) bad("stream_options.include_usage", "'stream_options.include_usage' must be a boolean");
      g.include_usage = v.get<bool>();
    }
    if (!g.stream) bad("stream_options", "'stream_options' is only allowed with 'stream': true");
  }
  // Parameters with one value we can honour: accepted at that value, refused otherwise.
  if (j.contains("n") && !j["n"].is_null() && j["n"] != 1) bad("n", "only n=1 is supported");
  for (const char* key : {"presence_penalty", "frequency_penalty"})
    if (j.contains(key) && !j[key].is_null() && (!j[key].is_number() || j[key].get<double>() != 0.0))
      bad(key, std::string("'") + key + "' is not supported (only 0)");
  if (j.contains("logprobs") && !j["logprobs"].is_null() && j["logprobs"] != false &&
      !(j["logprobs"].is_number() && j["logprobs"] == 0))
    bad("logprobs", "'logprobs' is not supported");
  for (const char* key : {"max_tokens", "max_completion_tokens", "temperature", "top_p", "seed", "stop", "stream",
                          "stream_options", "n", "presence_penalty", "frequency_penalty", "logprobs", "model", "user"})
    seen.insert(key);
  if (j.contains("model") && !j["model"].is_string()) bad("model", "'model' must be a string");
  return g;
}

void refuse_unknown(const json& j, const std::set<std::string>& seen) {
  for (const auto& [k, v] : j.items())
    if (!seen.count(k)) bad(k, "unknown or unsupported parameter '" + k + "'");
}

/// A message's content: a string, null, or an array of {"type":"text","text":...} parts.
std::string content_of(const json& c, const std::string& where) {
  if (c.is_null()) return {};
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) bad(where, "'" + where + "' must be a string or an array of text parts");
  std::string out;
  for (const auto& part : c) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string())
      bad(where, "only text content parts ({\"type\":\"text\",\"text\":...}) are supported");
    out += part["text"].get<std::string>();
  }
  return out;
}

chat::Message message_of(const json& m, std::size_t i) {
  const std::string at = "messages[" + std::to_string(i) + "]";
  if (!m.is_object()) bad(at, "'" + at + "' must be an object");
  if (!m.contains("role") || !m["role"].is_string()) bad(at + ".role", "'" + at + ".role' must be a string");
  const std::string role = m["role"].get<std::string>();
  chat::Message msg;
  if (role == "developer")
    msg.role = chat::Role::system;  // OpenAI's newer name for it
  else if (const auto r = chat::parse_role(role))
    msg.role = *r;
  else
    bad(at + ".role", "unknown role '" + role + "'");
  for (const auto& [k, v] : m.items()) {
    const std::string p = at + "." + k;
    if (k == "role") continue;
    if (k == "content")
      msg.content = content_of(v, p);
    else if (k == "name")
      msg.name = get_string(v, p);
    else if (k == "reasoning_content" && msg.role == chat::Role::assistant)
      msg.reasoning_content = v.is_null() ? std::string() : get_string(v, p);
    else if (k == "tool_call_id" && msg.role == chat::Role::tool)
      msg.tool_call_id = get_string(v, p);
    else if (k == "tool_calls" && msg.role == chat::Role::assistant) {
      if (v.is_null()) continue;
      if (!v.is_array()) bad(p, "'" + p + "' must be an array");
      for (std::size_t c = 0; c < v.size(); ++c) {
        const json& call = v[c];
        const std::string cp = p + "[" + std::to_string(c) + "]";
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
          bad(cp, "'" + cp + "' must be an object with a 'function'");
        const json& f = call["function"];
        chat::ToolCall tc;
        if (call.contains("id")) tc.id = get_string(call["id"], cp + ".id");
        if (!f.contains("name")) bad(cp + ".function.name", "'" + cp + ".function.name' is required");
        tc.name = get_string(f["name"], cp + ".function.name");
        if (f.contains("arguments")) tc.arguments = get_string(f["arguments"], cp + ".function.arguments");
        if (const auto deep = sdk::json_too_deep(tc.arguments))
          bad(cp + ".function.arguments", "'" + cp + ".function.arguments' nests deeper than " +
                                              std::to_string(sdk::kMaxJsonDepth) + " levels (at byte " +
                                              std::to_string(*deep) + ")");
        msg.tool_calls.push_back(std::move(tc));
      }
    } else if (k == "refusal" && v.is_null()) {
      continue;
    } else {
      bad(p, "unknown or unsupported parameter '" + p + "'");
    }
  }
  return msg;
}

std::vector<std::uint32_t> ids_of(const json& a) {
  std::vector<std::uint32_t> ids;
  for (const auto& x : a) {
    if (!x.is_number_unsigned() || x.get<std::uint64_t>() > 0xffffffffu)
      bad("prompt", "'prompt' must be a string or an array of token ids");
    ids.push_back(static_cast<std::uint32_t>(x.get<std::uint64_t>()));
  }
  return ids;
}

}  // namespace

ChatRequest parse_chat_request(std::string_view body, std::int64_t default_max_tokens, bool thinking) {
  const json j = parse_body(body);
  std::set<std::string> seen;
  ChatRequest r;
  r.render.thinking = thinking;
  r.gen = read_gen(j, default_max_tokens, seen, true);
  seen.insert({"messages", "tools", "tool_choice", "reasoning_effort", "parallel_tool_calls"});
  if (!j.contains("messages")) bad("messages", "'messages' is required");
  const json& msgs = j["messages"];
  if (!msgs.is_array() || msgs.empty()) bad("messages", "'messages' must be a non-empty array");
  for (std::size_t i = 0; i < msgs.size(); ++i) r.messages.push_back(message_of(msgs[i], i));
  if (j.contains("tools") && !j["tools"].is_null()) {
    if (!j["tools"].is_array()) bad("tools", "'tools' must be an array");
    for (std::size_t i = 0; i < j["tools"].size(); ++i) {
      const json& t = j["tools"][i];
      if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") ||
          !t["function"].is_object() || !t["function"].contains("name") || !t["function"]["name"].is_string())
        bad("tools[" + std::to_string(i) + "]",
            "each tool must be {\"type\":\"function\",\"function\":{\"name\":...}}");
    }
    r.render.tools = j["tools"].dump();
  }
  if (j.contains("tool_choice") && !j["tool_choice"].is_null()) {
    const json& tc = j["tool_choice"];
    if (tc == "auto")
      r.render.tool_choice = chat::ToolChoice::automatic;
    else if (tc == "none")
      r.render.tool_choice = chat::ToolChoice::none;
    else if (tc == "required")
      r.render.tool_choice = chat::ToolChoice::required;
    else
      bad("tool_choice",
          "'tool_choice' must be \"auto\", \"none\" or \"required\" (naming one function is not supported)");
  }
  if (j.contains("parallel_tool_calls") && !j["parallel_tool_calls"].is_null() &&
      !j["parallel_tool_calls"].is_boolean())
    bad("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
  if (j.contains("reasoning_effort") && !j["reasoning_effort"].is_null()) {
    const json& e = j["reasoning_effort"];
    if (!e.is_string()) bad("reasoning_effort", "'reasoning_effort' must be a string");
    const std::string v = e.get<std::string>();
    if (v == "none") {
      r.render.thinking = false;
    } else {
      try {
        r.render.effort = chat::parse_effort(v);
        r.render.thinking = true;  // asking for an effort asks for thinking, whatever the model's default
      } catch (const UsageError& err) {
        bad("reasoning_effort", std::string("'reasoning_effort': ") + err.what() + " (or \"none\" for no thinking)");
      }
    }
  }
  refuse_unknown(j, seen);
  return r;
}

CompletionRequest parse_completion_request(std::string_view body, std::int64_t default_max_tokens) {
  const json j = parse_body(body);
  std::set<std::string> seen;
  CompletionRequest r;
  r.gen = read_gen(j, default_max_tokens, seen, false);
  seen.insert({"prompt", "echo", "suffix", "best_of"});
  if (!j.contains("prompt")) bad("prompt", "'prompt' is required");
  const json& p = j["prompt"];
  if (p.is_string()) {
    r.prompt = p.get<std::string>();
  } else if (p.is_array() && !p.empty() && p[0].is_number()) {
    r.prompt_ids = ids_of(p);
    r.ids_given = true;
  } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    r.prompt = p[0].get<std::string>();
  } else if (p.is_array() && p.size() == 1 && p[0].is_array()) {
    r.prompt_ids = ids_of(p[0]);
    r.ids_given = true;
  } else {
    bad("prompt", "'prompt' must be a string or an array of token ids (one prompt per request)");
  }
  if (!r.ids_given && r.prompt.empty()) bad("prompt", "'prompt' must not be empty");
  if (r.ids_given && r.prompt_ids.empty()) bad("prompt", "'prompt' must not be empty");
  if (j.contains("echo") && !j["echo"].is_null() && j["echo"] != false) bad("echo", "'echo' is not supported");
  if (j.contains("suffix") && !j["suffix"].is_null()) bad("suffix", "'suffix' is not supported");
  if (j.contains("best_of") && !j["best_of"].is_null() && j["best_of"] != 1)
    bad("best_of", "only best_of=1 is supported");
  refuse_unknown(j, seen);
  return r;
}

std::string StopMatcher::push(std::string_view text) {
  if (stopped_) return {};
  held_.append(text);
  if (stops_.empty()) {
    std::string out;
    out.swap(held_);
    return out;
  }
  // The earliest complete stop string ends the text.
  std::size_t cut = std::string::npos;
  for (const auto& s : stops_) cut = std::min(cut, held_.find(s));
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, cut);
    held_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  std::size_t keep = 0;
  for (const auto& s : stops_)
    for (std::size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k)
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  if (!stopped_) out.swap(held_);
  held_.clear();
  return out;
}

}  // namespace k3::serve
