// `k3host serve` request bodies: the JSON of POST /v1/chat/completions and /v1/completions
// through parse_chat_request / parse_completion_request (settings validation), then what
// the server does next with a chat request before it needs a model: chat::render of its
// messages and tools (a UsageError there is answered 400). The first input byte picks the
// endpoint (odd: completions), the rest is the body. A refusal is ApiError (the 400/4xx
// the server sends) or k3::Error; its error_body must be valid JSON.
// Oracle: accepted settings are inside their documented ranges; an accepted body, and each
// tool call's arguments text, nests at most 64 levels (sdk/k3/json_depth.hpp). HTTP
// reading before the body: fuzz_serve_http.cpp.
#include <nlohmann/json.hpp>

#include <k3/chat.hpp>
#include <k3/json_depth.hpp>

#include "fuzz_support.hpp"
#include "serve/request.hpp"

namespace {

void check_gen(const k3::serve::GenParams& g) {
  k3::fuzz::check(g.max_tokens >= 1, "max_tokens below 1");
  k3::fuzz::check(g.sampling.temperature >= 0 && g.sampling.temperature <= 2, "temperature outside [0, 2]");
  k3::fuzz::check(g.sampling.top_p > 0 && g.sampling.top_p <= 1, "top_p outside (0, 1]");
  k3::fuzz::check(g.stop.size() <= 4, "more than 4 stop sequences");
  for (const auto& s : g.stop) k3::fuzz::check(!s.empty(), "an empty stop sequence");
  k3::fuzz::check(!g.include_usage || g.stream, "include_usage without stream");
}

void check_depth(std::string_view body) {
  k3::fuzz::check(!k3::sdk::json_too_deep(body), "a body nested deeper than 64 levels was accepted");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view body = k3::fuzz::as_text(data + 1, size - 1);
  constexpr std::int64_t kDefaultMaxTokens = 512;
  k3::fuzz::guarded([&] {
    try {
      if ((data[0] & 1) != 0) {
        const auto r = k3::serve::parse_completion_request(body, kDefaultMaxTokens);
        check_gen(r.gen);
        check_depth(body);
        k3::fuzz::check(!r.ids_given || r.prompt.empty(), "both a text and an id prompt");
      } else {
        const auto r = k3::serve::parse_chat_request(body, kDefaultMaxTokens);
        check_gen(r.gen);
        check_depth(body);
        for (const auto& m : r.messages)
          for (const auto& c : m.tool_calls)
            k3::fuzz::check(!k3::sdk::json_too_deep(c.arguments), "tool call arguments nested deeper than 64 levels");
        const auto segments = k3::chat::render(r.messages, r.render);
        k3::fuzz::check(!segments.empty(), "a rendered conversation without segments");
      }
    } catch (const k3::serve::ApiError& e) {
      const std::string err = k3::serve::error_body(e);
      k3::fuzz::check(nlohmann::json::accept(err), "error_body is not valid JSON: " + err);
      k3::fuzz::check(e.status >= 400 && e.status < 600, "an ApiError with HTTP status " + std::to_string(e.status));
    }
  });
  return 0;
}
