// `k3host serve`'s request path from the first byte a client sends: the bytes of one
// connection are read as the server's connections read them (serve/http_request.hpp:
// Beast's parser with the server's limits, then check_head, then the body), request after
// request (pipelined), and each complete POST to /v1/chat/completions or /v1/completions
// goes on to parse_chat_request / parse_completion_request and, for chat, chat::render, as
// the server's handler and job do. The limits are small (1 kB of header, 16 fields, 8 kB of
// body) so that mutations reach them.
// Oracle: a refusal has a documented status (400, 411, 413, 417, 431) and a message; an
// accepted request holds no more fields than the limit, a body no larger than the limit,
// and took bytes; an accepted API body nests at most 64 levels; a body's refusal is a
// 4xx/5xx ApiError whose error_body is valid JSON.
#include <set>

#include <nlohmann/json.hpp>

#include <k3/chat.hpp>
#include <k3/json_depth.hpp>

#include "fuzz_support.hpp"
#include "serve/http_request.hpp"
#include "serve/request.hpp"

namespace {

const k3::serve::HttpLimits kLimits{1024, 16, 8192};

void api_body(const k3::serve::HttpRequest& r) {
  const bool chat = r.path == "/v1/chat/completions";
  if (r.method != "POST" || (!chat && r.path != "/v1/completions")) return;
  try {
    if (chat) {
      const auto c = k3::serve::parse_chat_request(r.body, 256);
      (void)k3::chat::render(c.messages, c.render);
    } else {
      (void)k3::serve::parse_completion_request(r.body, 256);
    }
    k3::fuzz::check(!k3::sdk::json_too_deep(r.body), "a body nested deeper than 64 levels was accepted");
    k3::fuzz::show("body accepted", r.path.c_str());
  } catch (const k3::serve::ApiError& e) {
    k3::fuzz::show("body refused", e.what());
    k3::fuzz::check(e.status >= 400 && e.status < 600, "an ApiError with HTTP status " + std::to_string(e.status));
    k3::fuzz::check(nlohmann::json::accept(k3::serve::error_body(e)), "error_body is not valid JSON");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view rest = k3::fuzz::as_text(data, size);
  k3::fuzz::guarded([&] {
    static const std::set<int> kStatuses = {400, 411, 413, 417, 431};
    for (int n = 0; n < 64 && !rest.empty(); ++n) {
      const auto p = k3::serve::parse_http_request(rest, kLimits);
      if (!p.request) {
        if (p.refusal.status == 0) return k3::fuzz::show("incomplete", "the connection would wait for more");
        k3::fuzz::show("http refused", p.refusal.message.c_str());
        k3::fuzz::check(kStatuses.count(p.refusal.status) == 1,
                        "refused with status " + std::to_string(p.refusal.status));
        k3::fuzz::check(!p.refusal.message.empty(), "a refusal without a message");
        return;  // the server closes the connection after a refusal
      }
      k3::fuzz::show("http request", (p.request->method + " " + p.request->target).c_str());
      k3::fuzz::check(p.consumed > 0 && p.consumed <= rest.size(),
                      "a request that took no bytes, or more than there were");
      k3::fuzz::check(p.request->headers.size() <= kLimits.header_fields, "more header fields than the limit");
      k3::fuzz::check(p.request->body.size() <= kLimits.body_bytes, "a body over the limit");
      api_body(*p.request);
      rest.remove_prefix(p.consumed);
    }
  });
  return 0;
}
