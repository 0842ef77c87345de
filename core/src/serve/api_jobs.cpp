// Chat and text completions as queue jobs (api_jobs.hpp): OpenAI's response shapes, plain
// and streamed. A plain reply is sent with chunked transfer too, its header first: then a
// client that closed its side can be probed with spaces before the JSON (which JSON
// allows), as a stream is with SSE comment lines, and its generation stopped when it is
// gone (http_server.hpp).
#include "serve/api_jobs.hpp"

#include <cstdio>
#include <ctime>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <k3/error.hpp>
#include <k3/log.hpp>

#include "serve/reply_text.hpp"

namespace k3::serve {

using json = nlohmann::json;

namespace {

constexpr const char* kComponent = "serve";

/// The model may write bytes that are not UTF-8 (a byte-level token, a character cut by
/// max_tokens): they become U+FFFD in the JSON text.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

const char* finish_reason(const RunResult& r, bool stop_string, bool tool_calls) {
  if (tool_calls && (r.stopped_at_eos || stop_string)) return "tool_calls";
  if (r.stopped_at_eos || stop_string) return "stop";
  return "length";
}

json usage_json(std::size_t prompt, std::size_t completion, std::int64_t cached) {
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

json tool_calls_json(const std::vector<chat::ToolCall>& calls, std::size_t first_index, bool with_index) {
  json a = json::array();
  for (std::size_t i = 0; i < calls.size(); ++i) {
    json c = {{"id", calls[i].id},
              {"type", "function"},
              {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (with_index) c["index"] = first_index + i;
    a.push_back(std::move(c));
  }
  return a;
}

const HttpHeaders kEventStream = {{"Cache-Control", "no-cache"}};
constexpr const char* kJsonFiller = " ";
constexpr const char* kSseFiller = ":\n\n";

/// What both jobs share: the queue's hooks, the client, the run request.
class ApiJob : public GenerationJob, public std::enable_shared_from_this<ApiJob> {
 public:
  ApiJob(ApiContext& cx, std::shared_ptr<Responder> out, std::chrono::steady_clock::time_point when)
      : cx_(cx), out_(std::move(out)) {
    deadline = when;
  }
  /// A client that goes away stops the generation (at once, wherever it is).
  void watch_client() {
    out_->on_gone([w = std::weak_ptr<ApiJob>(shared_from_this())] {
      if (auto j = w.lock()) j->stop.store(true);
    });
  }
  void reject(const ApiError& e) override { reply_error(*out_, e); }

 protected:
  /// The client left while it waited: nothing to run.
  bool client_left() {
    if (!out_->gone() && !stop.load()) return false;
    log(LogLevel::info, kComponent, "a request whose client went away while it waited was dropped");
    return true;
  }
  void prepare_run(std::vector<std::uint32_t> ids, const GenParams& gen) {
    prompt_tokens_ = ids.size();
    created_ = static_cast<std::int64_t>(std::time(nullptr));
    run_.ids = std::move(ids);
    run_.max_tokens = gen.max_tokens;
    run_.sampling = gen.sampling;
    run_.stop = &stop;
    run_.deadline = deadline;
  }
  /// Runs the engine; an exception after the reply started is sent to the client in the
  /// reply's own format (`error_chunk`), and nullopt returned.
  std::optional<RunResult> generate(const std::string& what,
                                    const std::function<std::string(const ApiError&)>& error_chunk) {
    try {
      RunResult r = cx_.engine.run(run_);
      cx_.record(r, prompt_tokens_, out_->gone() ? what + " (client gone)" : what);
      if (out_->gone()) return std::nullopt;
      return r;
    } catch (const std::exception& e) {
      log(LogLevel::error, kComponent, std::string("generation failed: ") + e.what());
      out_->write(error_chunk(ApiError(500, e.what(), "server_error")));
      out_->finish();
      return std::nullopt;
    }
  }
  /// Writes a piece of a stream; a failed write stops the generation.
  void send(const std::string& s) {
    if (!out_->write(s)) stop.store(true);
  }
  /// Refuses (400, context_length_exceeded) a prompt the context cannot hold with a reply;
  /// true when it did. `what` opens the message ("This conversation", "The prompt").
  bool refused_too_long(std::size_t ids, const std::string& what, const char* param) {
    if (static_cast<std::int64_t>(ids) < cx_.engine.context()) return false;
    reject(ApiError(400,
                    what + " is " + std::to_string(ids) + " tokens; the context holds " +
                        std::to_string(cx_.engine.context()) + " (memory.context) including the reply.",
                    "invalid_request_error", param, "context_length_exceeded"));
    return true;
  }
  /// Ends a stream of `object` chunks: the usage chunk when the client asked for it
  /// (stream_options.include_usage), then [DONE].
  void end_stream(const char* object, bool include_usage, const RunResult& r) {
    if (include_usage)
      send(sse({{"id", id_},
                {"object", object},
                {"created", created_},
                {"model", cx_.model_id},
                {"choices", json::array()},
                {"usage", usage_json(prompt_tokens_, r.generated.size(), r.cached)}}));
    send("data: [DONE]\n\n");
    out_->finish();
  }

  ApiContext& cx_;
  std::shared_ptr<Responder> out_;
  RunRequest run_;
  std::string id_;
  std::int64_t created_ = 0;
  std::size_t prompt_tokens_ = 0;
};

class ChatJob final : public ApiJob {
 public:
  ChatJob(ApiContext& cx, ChatRequest r, std::shared_ptr<Responder> out, std::chrono::steady_clock::time_point when)
      : ApiJob(cx, std::move(out), when), req_(std::move(r)) {}

  void run() override {
    if (client_left()) return;
    Engine& engine = cx_.engine;
    std::vector<std::uint32_t> ids;
    try {
      ids = engine.chat_tokens().encode(chat::render(req_.messages, req_.render));
    } catch (const UsageError& e) {
      return reject(ApiError(400, e.what(), "invalid_request_error", "messages"));
    }
    if (refused_too_long(ids.size(), "This conversation", "messages")) return;
    prepare_run(std::move(ids), req_.gen);
    run_.stop_ids = engine.chat_tokens().stop_ids();
    id_ = cx_.new_id("chatcmpl-");
    ChatOutput out(engine, req_.render.thinking, req_.gen.stop);
    if (req_.gen.stream)
      streamed(out);
    else
      plain(out);
  }

 private:
  /// A reply cut inside the think channel has reasoning and no answer (content ""): the choice
  /// says so, since clients that show only content would show nothing (docs/serve.md).
  void mark_reasoning_unfinished(json& choice, const ChatOutput& out) const {
    if (!out.in_reasoning()) return;
    choice["reasoning_unfinished"] = true;
    log(LogLevel::info, kComponent,
        id_ +
            ": the reply ended inside the think channel (no answer yet): raise max_tokens, or send "
            "reasoning_effort \"none\"");
  }

  void name_calls(std::vector<chat::ToolCall>& calls) {
    for (auto& c : calls) c.id = cx_.new_id("call_");
  }

  void plain(ChatOutput& out) {
    out_->start(200, "application/json", {}, kJsonFiller);
    run_.on_token = [&](std::uint32_t id) {
      out.push(id);
      if (out.stopped()) stop.store(true);
    };
    const auto r = generate("chat", [](const ApiError& e) { return error_body(e); });
    if (!r) return;
    out.flush();
    name_calls(out.calls);
    json msg = {{"role", "assistant"}};
    msg["content"] = out.content.empty() && !out.calls.empty() ? json(nullptr) : json(out.content);
    if (req_.render.thinking) msg["reasoning_content"] = out.reasoning;
    if (!out.calls.empty()) msg["tool_calls"] = tool_calls_json(out.calls, 0, false);
    json choice = {{"index", 0},
                   {"message", msg},
                   {"logprobs", nullptr},
                   {"finish_reason", finish_reason(*r, out.stopped(), !out.calls.empty())}};
    mark_reasoning_unfinished(choice, out);
    const json body = {{"id", id_},
                       {"object", "chat.completion"},
                       {"created", created_},
                       {"model", cx_.model_id},
                       {"choices", json::array({std::move(choice)})},
                       {"usage", usage_json(prompt_tokens_, r->generated.size(), r->cached)}};
    out_->write(dump(body));
    out_->finish();
  }

  json chunk_json(json delta, const json& finish) const {
    return {{"id", id_},
            {"object", "chat.completion.chunk"},
            {"created", created_},
            {"model", cx_.model_id},
            {"choices",
             json::array(
                 {{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", finish}}})}};
  }

  void streamed(ChatOutput& out) {
    out_->start(200, "text/event-stream", kEventStream, kSseFiller);
    std::size_t n_calls = 0;
    auto send_delta = [&](ChatOutput::Delta d) {
      if (!d.reasoning.empty()) send(sse(chunk_json({{"reasoning_content", d.reasoning}}, nullptr)));
      if (!d.content.empty()) send(sse(chunk_json({{"content", d.content}}, nullptr)));
      if (!d.calls.empty()) {
        name_calls(d.calls);
        for (std::size_t i = 0; i < d.calls.size(); ++i) out.calls[n_calls + i].id = d.calls[i].id;
        send(sse(chunk_json({{"tool_calls", tool_calls_json(d.calls, n_calls, true)}}, nullptr)));
        n_calls += d.calls.size();
      }
    };
    send(sse(chunk_json({{"role", "assistant"}, {"content", ""}}, nullptr)));
    run_.on_token = [&](std::uint32_t id) {
      send_delta(out.push(id));
      if (out.stopped()) stop.store(true);
    };
    const auto r = generate("chat (stream)", [](const ApiError& e) { return "data: " + error_body(e) + "\n\n"; });
    if (!r) return;
    send_delta(out.flush());
    json last = chunk_json(json::object(), finish_reason(*r, out.stopped(), !out.calls.empty()));
    mark_reasoning_unfinished(last["choices"][0], out);
    send(sse(last));
    end_stream("chat.completion.chunk", req_.gen.include_usage, *r);
  }

  ChatRequest req_;
};

class CompletionJob final : public ApiJob {
 public:
  CompletionJob(ApiContext& cx, CompletionRequest r, std::shared_ptr<Responder> out,
                std::chrono::steady_clock::time_point when)
      : ApiJob(cx, std::move(out), when), req_(std::move(r)) {}

  void run() override {
    if (client_left()) return;
    Engine& engine = cx_.engine;
    std::vector<std::uint32_t> ids;
    if (req_.ids_given) {
      ids = req_.prompt_ids;
      const auto vocab = static_cast<std::uint64_t>(engine.runtime().model().config().vocab_size);
      for (auto id : ids)
        if (id >= vocab)
          return reject(
              ApiError(400, "token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(vocab),
                       "invalid_request_error", "prompt"));
    } else {
      try {
        ids = engine.runtime().encode(req_.prompt);
      } catch (const UsageError& e) {
        return reject(ApiError(400, e.what(), "invalid_request_error", "prompt"));
      }
    }
    if (ids.empty()) return reject(ApiError(400, "the prompt encodes to no tokens", "invalid_request_error", "prompt"));
    if (refused_too_long(ids.size(), "The prompt", "prompt")) return;
    prepare_run(std::move(ids), req_.gen);
    id_ = cx_.new_id("cmpl-");
    TextOutput out(engine.runtime(), req_.gen.stop, engine.eos());
    if (req_.gen.stream)
      streamed(out);
    else
      plain(out);
  }

 private:
  json body_of(const std::string& text, const json& finish) const {
    return {{"id", id_},
            {"object", "text_completion"},
            {"created", created_},
            {"model", cx_.model_id},
            {"choices",
             json::array({{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish}}})}};
  }

  void plain(TextOutput& out) {
    out_->start(200, "application/json", {}, kJsonFiller);
    run_.on_token = [&](std::uint32_t id) {
      out.push(id);
      if (out.stopped()) stop.store(true);
    };
    const auto r = generate("completions", [](const ApiError& e) { return error_body(e); });
    if (!r) return;
    out.flush();
    json body = body_of(out.all, finish_reason(*r, out.stopped(), false));
    body["usage"] = usage_json(prompt_tokens_, r->generated.size(), r->cached);
    out_->write(dump(body));
    out_->finish();
  }

  void streamed(TextOutput& out) {
    out_->start(200, "text/event-stream", kEventStream, kSseFiller);
    run_.on_token = [&](std::uint32_t id) {
      const std::string s = out.push(id);
      if (!s.empty()) send(sse(body_of(s, nullptr)));
      if (out.stopped()) stop.store(true);
    };
    const auto r =
        generate("completions (stream)", [](const ApiError& e) { return "data: " + error_body(e) + "\n\n"; });
    if (!r) return;
    const std::string rest = out.flush();
    if (!rest.empty()) send(sse(body_of(rest, nullptr)));
    send(sse(body_of("", finish_reason(*r, out.stopped(), false))));
    end_stream("text_completion", req_.gen.include_usage, *r);
  }

  CompletionRequest req_;
};

}  // namespace

void reply_error(Responder& out, const ApiError& e) { out.reply(e.status, "application/json", error_body(e)); }

void ApiContext::record(const RunResult& r, std::size_t prompt_tokens, const std::string& what) {
  const std::lock_guard lock(record_mutex);
  const StreamStats io = engine.runtime().model().stream_stats();
  for (std::size_t i = reported_failures; i < io.expert_failures.size(); ++i)
    log(LogLevel::error, kComponent,
        "routed expert failed: " + io.expert_failures[i] + " (the reply's ids are unsound)");
  reported_failures = io.expert_failures.size();
  metrics.record(r, prompt_tokens, io, engine.stats());
  char line[256];
  std::snprintf(line, sizeof line, "%s: %zu prompt tokens (%lld reused), %zu generated, ttft %.3f s, %.3f s/token%s",
                what.c_str(), prompt_tokens, static_cast<long long>(r.cached), r.generated.size(),
                r.first_token_seconds,
                r.generated.size() > 1 ? r.decode_seconds / static_cast<double>(r.generated.size() - 1) : 0.0,
                r.timed_out     ? " (timed out)"
                : r.interrupted ? " (stopped)"
                                : "");
  log(LogLevel::info, kComponent, line);
}

std::shared_ptr<GenerationJob> chat_job(ApiContext& cx, ChatRequest request, std::shared_ptr<Responder> out,
                                        std::chrono::steady_clock::time_point deadline) {
  auto job = std::make_shared<ChatJob>(cx, std::move(request), std::move(out), deadline);
  job->watch_client();
  return job;
}

std::shared_ptr<GenerationJob> completion_job(ApiContext& cx, CompletionRequest request, std::shared_ptr<Responder> out,
                                              std::chrono::steady_clock::time_point deadline) {
  auto job = std::make_shared<CompletionJob>(cx, std::move(request), std::move(out), deadline);
  job->watch_client();
  return job;
}

}  // namespace k3::serve
