// The HTTP side of `k3host serve` on cpp-httplib: routes, the API key, OpenAI's JSON shapes
// (plain and server-sent events), the queue in front of the one generation, metrics.
#include <k3/serve.hpp>

#include <arpa/inet.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <k3/error.hpp>
#include <k3/log.hpp>

#include "serve/engine.hpp"
#include "serve/metrics.hpp"
#include "serve/request.hpp"

namespace k3::serve {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

bool is_loopback(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  return false;
}

namespace {

constexpr const char* kComponent = "serve";

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_body(e), "application/json");
}

/// The model may write bytes that are not UTF-8 (a byte-level token, a character cut by
/// max_tokens): they become U+FFFD in the JSON text.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

/// Bearer token check without an early exit on the first differing byte.
bool same_key(const std::string& got, const std::string& want) {
  unsigned diff = got.size() == want.size() ? 0u : 1u;
  for (std::size_t i = 0; i < got.size(); ++i) diff |= static_cast<unsigned>(got[i] ^ want[i % std::max<std::size_t>(1, want.size())]);
  return diff == 0;
}

}  // namespace

/// One request's generation state, shared by the handler and the streaming provider.
struct Job {
  std::atomic<bool> stop{false};
  RunRequest run;
  Clock::time_point deadline;
  std::string id;
  std::int64_t created = 0;
  std::size_t prompt_tokens = 0;
};

struct Server::Impl {
  ServeOptions opt;
  httplib::Server http;
  int port = 0;
  std::thread listener;
  Metrics metrics;

  std::atomic<bool> ready{false};
  std::atomic<bool> listen_returned{false};
  std::atomic<bool> stopping{false};
  std::unique_ptr<Engine> engine;  ///< set once by load(), before ready
  std::string model_id;
  std::int64_t created = 0;

  // The queue: one request holds the model; up to opt.queue wait in ticket order.
  std::mutex m;
  std::condition_variable cv;
  bool busy = false;
  std::deque<std::uint64_t> waiting;
  std::uint64_t next_ticket = 0;
  std::atomic<bool>* running_stop = nullptr;  ///< the running request's stop flag (under m)
  std::atomic<std::uint64_t> next_id{1};
  std::size_t reported_failures = 0;  ///< expert failures already logged (under the turn)

  /// The model, held by one request at a time; released on destruction.
  class Turn {
   public:
    Turn(Impl& s, std::atomic<bool>* stop) : s_(s) {
      std::lock_guard lock(s_.m);
      s_.running_stop = stop;
      if (s_.stopping.load()) stop->store(true);  // stop() came between acquire() and here
    }
    ~Turn() {
      {
        std::lock_guard lock(s_.m);
        s_.busy = false;
        s_.running_stop = nullptr;
        s_.metrics.set_running(false);
      }
      s_.cv.notify_all();
    }
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;

   private:
    Impl& s_;
  };

  /// Waits for the model (ApiError 429 when the queue is full, 503 when stopping or not
  /// loaded, 408-as-503 when the deadline passes first).
  std::unique_ptr<Turn> acquire(Clock::time_point deadline, std::atomic<bool>* stop) {
    std::unique_lock lock(m);
    if (stopping.load()) throw ApiError(503, "The server is shutting down.", "server_error", "", "shutting_down");
    if (busy || !waiting.empty()) {
      if (waiting.size() >= opt.queue) {
        metrics.count_rejected();
        throw ApiError(429, "The server is busy: " + std::to_string(opt.queue) +
                                " requests are already waiting for the model. Retry later.",
                       "rate_limit_error", "", "queue_full");
      }
    }
    const std::uint64_t ticket = next_ticket++;
    waiting.push_back(ticket);
    metrics.set_queue(waiting.size());
    const bool turn = cv.wait_until(lock, deadline, [&] {
      return stopping.load() || (!busy && waiting.front() == ticket);
    });
    if (!turn || stopping.load()) {
      waiting.erase(std::find(waiting.begin(), waiting.end(), ticket));
      metrics.set_queue(waiting.size());
      lock.unlock();
      cv.notify_all();
      if (stopping.load()) throw ApiError(503, "The server is shutting down.", "server_error", "", "shutting_down");
      throw ApiError(503, "Timed out waiting for the model (request timeout " +
                              std::to_string(static_cast<long>(opt.request_timeout_seconds)) + " s).",
                     "server_error", "", "timeout");
    }
    waiting.pop_front();
    busy = true;
    metrics.set_queue(waiting.size());
    metrics.set_running(true);
    lock.unlock();
    return std::make_unique<Turn>(*this, stop);
  }

  void check_ready() const {
    if (!ready.load()) throw ApiError(503, "The model is still loading.", "server_error", "", "model_loading");
  }

  std::string new_id(const char* prefix) { return std::string(prefix) + std::to_string(next_id++); }

  void routes();
  void plain_reply(httplib::Response& res, std::shared_ptr<Job> job, std::shared_ptr<Turn> turn,
                   std::function<void(std::uint32_t)> per_token, std::function<json(const RunResult&)> finish,
                   const char* endpoint);
  void chat_completions(const httplib::Request& req, httplib::Response& res);
  void completions(const httplib::Request& req, httplib::Response& res);
  void record(const RunResult& r, std::size_t prompt_tokens, const char* endpoint);
};

// ---------------------------------------------------------------------------------------

namespace {

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

/// A chat reply token by token: the K3 parser's events, or (once the model wrote something
/// the format does not allow) the raw text of the rest as content.
class ChatOutput {
 public:
  ChatOutput(const Engine& engine, bool thinking, std::vector<std::string> stops)
      : engine_(engine), parser_(engine.chat_tokens(), thinking), stop_(std::move(stops)), thinking_(thinking) {}

  struct Delta {
    std::string reasoning, content;
    std::vector<chat::ToolCall> calls;
  };

  Delta push(std::uint32_t id) {
    Delta d;
    if (!raw_) {
      try {
        for (auto& ev : parser_.feed(id)) {
          switch (ev.kind) {
            case chat::StreamEvent::Kind::think_text: d.reasoning += ev.text; break;
            case chat::StreamEvent::Kind::response_text: d.content += stop_.push(ev.text); break;
            case chat::StreamEvent::Kind::tool_call: d.calls.push_back(std::move(ev.call)); break;
            case chat::StreamEvent::Kind::done: break;
          }
        }
      } catch (const Error& e) {
        raw_ = true;
        log(LogLevel::debug, kComponent, std::string("the reply left the K3 format, sending the rest as text: ") + e.what());
      }
      if (!raw_) return finish_delta(d);
    }
    if (engine_.chat_tokens().is_stop(id)) return finish_delta(d);
    raw_ids_.push_back(id);
    const std::string text = engine_.chat_tokens().decode(raw_ids_);
    std::size_t complete = text.size();
    // hold back an unfinished UTF-8 sequence at the end
    for (std::size_t back = 1; back <= std::min<std::size_t>(3, text.size()); ++back) {
      const unsigned char c = static_cast<unsigned char>(text[text.size() - back]);
      if ((c & 0xC0) == 0x80) continue;
      const std::size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      if (need > back) complete = text.size() - back;
      break;
    }
    if (complete > raw_printed_) {
      d.content += stop_.push(std::string_view(text).substr(raw_printed_, complete - raw_printed_));
      raw_printed_ = complete;
    }
    return finish_delta(d);
  }

  /// The rest at the end of generation.
  Delta flush() {
    Delta d;
    if (raw_) {
      const std::string text = engine_.chat_tokens().decode(raw_ids_);
      if (text.size() > raw_printed_) d.content += stop_.push(std::string_view(text).substr(raw_printed_));
      raw_printed_ = text.size();
    }
    d.content += stop_.flush();
    return finish_delta(d);
  }

  [[nodiscard]] bool stopped() const noexcept { return stop_.stopped(); }
  [[nodiscard]] bool thinking() const noexcept { return thinking_; }

  std::string reasoning, content;
  std::vector<chat::ToolCall> calls;

 private:
  Delta finish_delta(Delta& d) {
    reasoning += d.reasoning;
    content += d.content;
    calls.insert(calls.end(), d.calls.begin(), d.calls.end());
    return std::move(d);
  }
  const Engine& engine_;
  chat::CompletionParser parser_;
  StopMatcher stop_;
  bool thinking_;
  bool raw_ = false;
  std::vector<std::uint32_t> raw_ids_;
  std::size_t raw_printed_ = 0;
};

json tool_calls_json(const std::vector<chat::ToolCall>& calls, std::size_t first_index, bool with_index) {
  json a = json::array();
  for (std::size_t i = 0; i < calls.size(); ++i) {
    json c = {{"id", calls[i].id}, {"type", "function"},
              {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (with_index) c["index"] = first_index + i;
    a.push_back(std::move(c));
  }
  return a;
}

}  // namespace

void Server::Impl::record(const RunResult& r, std::size_t prompt_tokens, const char* endpoint) {
  const StreamStats io = engine->runtime().model().stream_stats();
  for (std::size_t i = reported_failures; i < io.expert_failures.size(); ++i)
    log(LogLevel::error, kComponent, "routed expert failed: " + io.expert_failures[i] + " (the reply's ids are unsound)");
  reported_failures = io.expert_failures.size();
  metrics.record(r, prompt_tokens, io, engine->stats());
  char line[256];
  std::snprintf(line, sizeof line, "%s: %zu prompt tokens (%lld reused), %zu generated, ttft %.3f s, %.3f s/token%s",
                endpoint, prompt_tokens, static_cast<long long>(r.cached), r.generated.size(), r.first_token_seconds,
                r.generated.size() > 1 ? r.decode_seconds / static_cast<double>(r.generated.size() - 1) : 0.0,
                r.timed_out ? " (timed out)" : r.interrupted ? " (stopped)" : "");
  log(LogLevel::info, kComponent, line);
}

// A plain (not streamed) reply is written when its generation ends. Until then a space is
// written at most once a second (JSON allows whitespace before the value), so that a client
// that went away is noticed, as in a stream, and its generation stopped.
void Server::Impl::plain_reply(httplib::Response& res, std::shared_ptr<Job> job, std::shared_ptr<Turn> turn,
                               std::function<void(std::uint32_t)> per_token,
                               std::function<json(const RunResult&)> finish, const char* endpoint) {
  res.set_chunked_content_provider(
      "application/json", [this, job, turn, per_token, finish, endpoint](std::size_t, httplib::DataSink& sink) {
        bool gone = false;
        auto last = Clock::now();
        job->run.on_token = [&](std::uint32_t id) {
          per_token(id);
          if (gone || Clock::now() - last < std::chrono::seconds(1)) return;
          last = Clock::now();
          if (!sink.write(" ", 1)) {
            gone = true;
            job->stop.store(true);
          }
        };
        std::string body;
        try {
          const RunResult r = engine->run(job->run);
          record(r, job->prompt_tokens, gone ? (std::string(endpoint) + " (client gone)").c_str() : endpoint);
          if (gone) return false;
          body = dump(finish(r));
        } catch (const std::exception& e) {
          log(LogLevel::error, kComponent, std::string("generation failed: ") + e.what());
          body = error_body(ApiError(500, e.what(), "server_error"));
        }
        sink.write(body.data(), body.size());
        sink.done();
        return true;
      });
}

void Server::Impl::chat_completions(const httplib::Request& req, httplib::Response& res) {
  check_ready();
  ChatRequest cr = parse_chat_request(req.body, opt.default_max_tokens);
  auto job = std::make_shared<Job>();
  job->deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(opt.request_timeout_seconds));
  auto turn = std::shared_ptr<Turn>(acquire(job->deadline, &job->stop));
  // Under the turn: the tokenizer is used from one thread at a time.
  std::vector<std::uint32_t> ids;
  try {
    ids = engine->chat_tokens().encode(chat::render(cr.messages, cr.render));
  } catch (const UsageError& e) {
    throw ApiError(400, e.what(), "invalid_request_error", "messages");
  }
  if (static_cast<std::int64_t>(ids.size()) >= engine->context())
    throw ApiError(400, "This conversation is " + std::to_string(ids.size()) + " tokens; the context holds " +
                            std::to_string(engine->context()) + " (memory.context) including the reply.",
                   "invalid_request_error", "messages", "context_length_exceeded");
  job->prompt_tokens = ids.size();
  job->id = new_id("chatcmpl-");
  job->created = static_cast<std::int64_t>(std::time(nullptr));
  job->run.ids = std::move(ids);
  job->run.max_tokens = cr.gen.max_tokens;
  job->run.sampling = cr.gen.sampling;
  job->run.stop_ids = engine->chat_tokens().stop_ids();
  job->run.stop = &job->stop;
  job->run.deadline = job->deadline;
  auto out = std::make_shared<ChatOutput>(*engine, cr.render.thinking, cr.gen.stop);
  const std::string model = model_id;
  auto name_calls = [this](std::vector<chat::ToolCall>& calls) {
    for (auto& c : calls) c.id = new_id("call_");
  };

  if (!cr.gen.stream) {
    const bool thinking = cr.render.thinking;
    plain_reply(res, job, turn, [out, job](std::uint32_t id) {
      out->push(id);
      if (out->stopped()) job->stop.store(true);
    }, [out, job, model, thinking, name_calls](const RunResult& r) {
      out->flush();
      name_calls(out->calls);
      json msg = {{"role", "assistant"}};
      msg["content"] = out->content.empty() && !out->calls.empty() ? json(nullptr) : json(out->content);
      if (thinking) msg["reasoning_content"] = out->reasoning;
      if (!out->calls.empty()) msg["tool_calls"] = tool_calls_json(out->calls, 0, false);
      return json{{"id", job->id},
                  {"object", "chat.completion"},
                  {"created", job->created},
                  {"model", model},
                  {"choices", json::array({{{"index", 0},
                                            {"message", msg},
                                            {"logprobs", nullptr},
                                            {"finish_reason", finish_reason(r, out->stopped(), !out->calls.empty())}}})},
                  {"usage", usage_json(job->prompt_tokens, r.generated.size(), r.cached)}};
    }, "chat");
    return;
  }

  const bool include_usage = cr.gen.include_usage;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [this, job, turn, out, model, include_usage, name_calls](std::size_t, httplib::DataSink& sink) {
        bool gone = false;
        auto chunk = [&](json delta, const json& finish) {
          if (gone) return;
          json c = {{"id", job->id}, {"object", "chat.completion.chunk"}, {"created", job->created}, {"model", model},
                    {"choices", json::array({{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr},
                                              {"finish_reason", finish}}})}};
          const std::string s = sse(c);
          if (!sink.write(s.data(), s.size())) {
            gone = true;
            job->stop.store(true);  // the client went away: end its generation
          }
        };
        std::size_t n_calls = 0;
        auto send = [&](ChatOutput::Delta d) {
          if (!d.reasoning.empty()) chunk({{"reasoning_content", d.reasoning}}, nullptr);
          if (!d.content.empty()) chunk({{"content", d.content}}, nullptr);
          if (!d.calls.empty()) {
            name_calls(d.calls);
            for (std::size_t i = 0; i < d.calls.size(); ++i) out->calls[n_calls + i].id = d.calls[i].id;
            chunk({{"tool_calls", tool_calls_json(d.calls, n_calls, true)}}, nullptr);
            n_calls += d.calls.size();
          }
        };
        chunk({{"role", "assistant"}, {"content", ""}}, nullptr);
        RunResult r;
        try {
          job->run.on_token = [&](std::uint32_t id) {
            send(out->push(id));
            if (out->stopped()) job->stop.store(true);
          };
          r = engine->run(job->run);
          send(out->flush());
        } catch (const std::exception& e) {
          log(LogLevel::error, kComponent, std::string("generation failed: ") + e.what());
          const std::string s = "data: " + error_body(ApiError(500, e.what(), "server_error")) + "\n\n";
          sink.write(s.data(), s.size());
          sink.done();
          return true;
        }
        record(r, job->prompt_tokens, gone ? "chat (client gone)" : "chat (stream)");
        if (gone) return false;
        chunk(json::object(), finish_reason(r, out->stopped(), !out->calls.empty()));
        if (include_usage && !gone) {
          json u = {{"id", job->id}, {"object", "chat.completion.chunk"}, {"created", job->created}, {"model", model},
                    {"choices", json::array()}, {"usage", usage_json(job->prompt_tokens, r.generated.size(), r.cached)}};
          const std::string s = sse(u);
          sink.write(s.data(), s.size());
        }
        const std::string done = "data: [DONE]\n\n";
        sink.write(done.data(), done.size());
        sink.done();
        return true;
      });
}

void Server::Impl::completions(const httplib::Request& req, httplib::Response& res) {
  check_ready();
  CompletionRequest cr = parse_completion_request(req.body, opt.default_max_tokens);
  auto job = std::make_shared<Job>();
  job->deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(opt.request_timeout_seconds));
  auto turn = std::shared_ptr<Turn>(acquire(job->deadline, &job->stop));
  std::vector<std::uint32_t> ids;
  if (cr.ids_given) {
    ids = cr.prompt_ids;
    const auto vocab = static_cast<std::uint64_t>(engine->runtime().model().config().vocab_size);
    for (auto id : ids)
      if (id >= vocab)
        throw ApiError(400, "token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(vocab),
                       "invalid_request_error", "prompt");
  } else {
    try {
      ids = engine->runtime().encode(cr.prompt);
    } catch (const UsageError& e) {
      throw ApiError(400, e.what(), "invalid_request_error", "prompt");
    }
  }
  if (ids.empty()) throw ApiError(400, "the prompt encodes to no tokens", "invalid_request_error", "prompt");
  if (static_cast<std::int64_t>(ids.size()) >= engine->context())
    throw ApiError(400, "The prompt is " + std::to_string(ids.size()) + " tokens; the context holds " +
                            std::to_string(engine->context()) + " (memory.context) including the reply.",
                   "invalid_request_error", "prompt", "context_length_exceeded");
  job->prompt_tokens = ids.size();
  job->id = new_id("cmpl-");
  job->created = static_cast<std::int64_t>(std::time(nullptr));
  job->run.ids = std::move(ids);
  job->run.max_tokens = cr.gen.max_tokens;
  job->run.sampling = cr.gen.sampling;
  job->run.stop = &job->stop;
  job->run.deadline = job->deadline;
  const std::string model = model_id;

  struct TextOut {
    explicit TextOut(Runtime& rt, std::vector<std::string> stops, std::uint32_t eos_id)
        : text(rt), stop(std::move(stops)), eos(eos_id) {}
    TextStream text;
    StopMatcher stop;
    std::uint32_t eos;
    std::string all;
    std::string push(std::uint32_t id) {
      if (id == eos) return {};
      std::string s = stop.push(text.push(id));
      all += s;
      return s;
    }
    std::string flush() {
      std::string s = stop.push(text.flush());
      s += stop.flush();
      all += s;
      return s;
    }
  };
  auto out = std::make_shared<TextOut>(engine->runtime(), cr.gen.stop, engine->eos());
  auto body_of = [job, model](const std::string& text, const json& finish) {
    return json{{"id", job->id}, {"object", "text_completion"}, {"created", job->created}, {"model", model},
                {"choices", json::array({{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish}}})}};
  };
  if (!cr.gen.stream) {
    plain_reply(res, job, turn, [out, job](std::uint32_t id) {
      out->push(id);
      if (out->stop.stopped()) job->stop.store(true);
    }, [out, job, body_of](const RunResult& r) {
      out->flush();
      json body = body_of(out->all, finish_reason(r, out->stop.stopped(), false));
      body["usage"] = usage_json(job->prompt_tokens, r.generated.size(), r.cached);
      return body;
    }, "completions");
    return;
  }
  const bool include_usage = cr.gen.include_usage;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [this, job, turn, out, model, include_usage, body_of](std::size_t, httplib::DataSink& sink) {
        bool gone = false;
        auto write = [&](const json& j) {
          if (gone) return;
          const std::string s = sse(j);
          if (!sink.write(s.data(), s.size())) {
            gone = true;
            job->stop.store(true);
          }
        };
        RunResult r;
        try {
          job->run.on_token = [&](std::uint32_t id) {
            const std::string s = out->push(id);
            if (!s.empty()) write(body_of(s, nullptr));
            if (out->stop.stopped()) job->stop.store(true);
          };
          r = engine->run(job->run);
          const std::string rest = out->flush();
          if (!rest.empty()) write(body_of(rest, nullptr));
        } catch (const std::exception& e) {
          log(LogLevel::error, kComponent, std::string("generation failed: ") + e.what());
          const std::string s = "data: " + error_body(ApiError(500, e.what(), "server_error")) + "\n\n";
          sink.write(s.data(), s.size());
          sink.done();
          return true;
        }
        record(r, job->prompt_tokens, gone ? "completions (client gone)" : "completions (stream)");
        if (gone) return false;
        write(body_of("", finish_reason(r, out->stop.stopped(), false)));
        if (include_usage) {
          json u = {{"id", job->id}, {"object", "text_completion"}, {"created", job->created}, {"model", model},
                    {"choices", json::array()}, {"usage", usage_json(job->prompt_tokens, r.generated.size(), r.cached)}};
          write(u);
        }
        const std::string done = "data: [DONE]\n\n";
        sink.write(done.data(), done.size());
        sink.done();
        return true;
      });
}

void Server::Impl::routes() {
  // Every handler's errors become OpenAI error objects.
  auto guarded = [this](void (Impl::*fn)(const httplib::Request&, httplib::Response&)) {
    return [this, fn](const httplib::Request& req, httplib::Response& res) {
      try {
        (this->*fn)(req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      } catch (const std::exception& e) {
        log(LogLevel::error, kComponent, std::string("request failed: ") + e.what());
        send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
      }
    };
  };
  http.Post("/v1/chat/completions", guarded(&Impl::chat_completions));
  http.Post("/v1/completions", guarded(&Impl::completions));
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    if (!ready.load()) return send_error(res, ApiError(503, "The model is still loading.", "server_error", "", "model_loading"));
    json entry = {{"id", model_id}, {"object", "model"}, {"created", created}, {"owned_by", "k3host"}};
    res.set_content(dump(json{{"object", "list"}, {"data", json::array({entry})}}), "application/json");
  });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const bool ok = ready.load() && !stopping.load();
    res.status = ok ? 200 : 503;
    res.set_content(json{{"status", ok ? "ok" : stopping.load() ? "stopping" : "loading"}}.dump(), "application/json");
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(ready.load()), "text/plain; version=0.0.4");
  });
  // The API key, before routing: /v1/* and /metrics.
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // No compressed responses: cpp-httplib's compressor holds small writes back, and a plain
    // reply's one-space writes are how a client that went away is noticed (plain_reply).
    // The request object is httplib's own (not const), so dropping the header is sound.
    const_cast<httplib::Request&>(req).headers.erase("Accept-Encoding");
    // cpp-httplib 0.11 enforces the body limit on Content-Length only, so a chunked body
    // (which it would read whole, however long) is refused before it is read.
    if (req.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos) {
      send_error(res, ApiError(411, "Send the request body with a Content-Length (chunked bodies are not accepted).",
                               "invalid_request_error", "", "length_required"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (opt.api_key.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (req.path.rfind("/v1/", 0) != 0 && req.path != "/metrics") return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (auth.rfind(prefix, 0) == 0 && same_key(auth.substr(prefix.size()), opt.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError(401, auth.empty() ? "You didn't provide an API key (Authorization: Bearer <key>)."
                                               : "Incorrect API key provided.",
                             "invalid_request_error", "", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // What httplib answers itself (unknown route, body too large, bad request line).
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404)
      send_error(res, ApiError(404, "Unknown route: " + req.method + " " + req.path, "invalid_request_error", "", "unknown_url"));
    else if (res.status == 413)
      send_error(res, ApiError(413, "The request body is larger than " + std::to_string(opt.max_body_bytes) + " bytes.",
                               "invalid_request_error", "", "request_too_large"));
    else
      send_error(res, ApiError(res.status, "HTTP error " + std::to_string(res.status), "invalid_request_error"));
  });
}

Server::Server(ServeOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.opt = std::move(options);
  if (s.opt.port < 0 || s.opt.port > 65535) throw UsageError("--port must be 0..65535");
  if (!is_loopback(s.opt.host) && s.opt.api_key.empty())
    throw UsageError("refusing to listen on " + s.opt.host +
                     " without an API key: a non-loopback address needs --api-key or K3_API_KEY");
  if (s.opt.max_body_bytes < 1) throw UsageError("--max-body must be >= 1 byte");
  if (s.opt.request_timeout_seconds <= 0 || s.opt.read_timeout_seconds <= 0 || s.opt.write_timeout_seconds <= 0)
    throw UsageError("timeouts must be > 0 seconds");
  if (s.opt.default_max_tokens < 1) throw UsageError("--max-tokens must be >= 1");
  if (s.opt.snapshot_interval < 1) throw UsageError("--snapshot-interval must be >= 1");
  const std::size_t threads = s.opt.queue + 8;  // the running request, the queue, health/metrics, idle keep-alives
  // httplib owns (and deletes) the task queue it is handed.
  s.http.new_task_queue = [threads] { return std::make_unique<httplib::ThreadPool>(threads).release(); };
  s.http.set_payload_max_length(s.opt.max_body_bytes);
  auto secs = [](double v) { return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(v)); };
  s.http.set_read_timeout(secs(s.opt.read_timeout_seconds));
  s.http.set_write_timeout(secs(s.opt.write_timeout_seconds));
  s.http.set_keep_alive_timeout(5);
  s.routes();
  const std::string bind_host = s.opt.host == "localhost" ? "127.0.0.1" : s.opt.host;
  if (s.opt.port == 0) {
    s.port = s.http.bind_to_any_port(bind_host);
    if (s.port <= 0) throw RuntimeError("cannot listen on " + s.opt.host + " (any port)");
  } else {
    if (!s.http.bind_to_port(bind_host, s.opt.port))
      throw RuntimeError("cannot listen on " + s.opt.host + ":" + std::to_string(s.opt.port) + " (in use?)");
    s.port = s.opt.port;
  }
  s.created = static_cast<std::int64_t>(std::time(nullptr));
}

Server::~Server() {
  stop();
  wait();
}

int Server::port() const noexcept { return impl_->port; }

void Server::start() {
  Impl& s = *impl_;
  if (s.listener.joinable()) return;
  // cpp-httplib 0.11 writes without MSG_NOSIGNAL: a client that went away would raise
  // SIGPIPE and end the process. Ignored (when nobody handles it) so the write fails instead.
  struct sigaction old{};
  sigaction(SIGPIPE, nullptr, &old);
  if (old.sa_handler == SIG_DFL) {
    struct sigaction ign{};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, nullptr);
  }
  s.listener = std::thread([&s] {
    s.http.listen_after_bind();
    s.listen_returned.store(true);
  });
  // Until httplib runs its loop, its stop() would do nothing and wait() would hang.
  for (int i = 0; i < 10000 && !s.http.is_running() && !s.listen_returned.load(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void Server::load(const Pipeline& pipeline, PluginHost& host, const LoadHooks& hooks) {
  Impl& s = *impl_;
  auto runtime = std::make_unique<Runtime>(pipeline, host, hooks);
  const GenerateSettings defaults = generate_settings_of(pipeline, *runtime);
  if (s.opt.model_name.empty()) {
    std::string uri = runtime->model_uri();
    while (uri.size() > 1 && uri.back() == '/') uri.pop_back();
    const auto slash = uri.find_last_of('/');
    s.model_id = slash == std::string::npos ? uri : uri.substr(slash + 1);
  } else {
    s.model_id = s.opt.model_name;
  }
  s.engine = std::make_unique<Engine>(std::move(runtime), defaults, s.opt);
  s.metrics.set_loaded(s.engine->runtime().model().stream_stats(), s.engine->runtime().load_seconds());
  s.ready.store(true);
}

void Server::stop() {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.m);
    s.stopping.store(true);
    if (s.running_stop != nullptr) s.running_stop->store(true);
  }
  s.cv.notify_all();
  s.http.stop();
}

void Server::wait() {
  Impl& s = *impl_;
  if (s.listener.joinable()) s.listener.join();
}

bool Server::stopping() const noexcept { return impl_->stopping.load(); }

}  // namespace k3::serve
