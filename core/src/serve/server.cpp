// `k3host serve`'s OpenAI API (k3/serve.hpp): the routes and the API key over the HTTP
// layer (http_server.hpp), the queue in front of the generations (generation_queue.hpp)
// with the chat and text completion jobs (api_jobs.hpp), the model list, health and metrics.
// The HTTP layer has checked every limit before a request gets here.
#include <k3/serve.hpp>

#include <atomic>
#include <chrono>
#include <ctime>
#include <memory>
#include <mutex>

#include <nlohmann/json.hpp>

#include <k3/error.hpp>
#include <k3/log.hpp>

#include "serve/api_jobs.hpp"
#include "serve/engine.hpp"
#include "serve/generation_queue.hpp"
#include "serve/http_server.hpp"
#include "serve/latency_metrics.hpp"
#include "serve/metrics.hpp"
#include "serve/options.hpp"
#include "serve/request.hpp"

namespace k3::serve {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

bool is_loopback(const std::string& host) { return literal_is_loopback(host); }

namespace {

/// Bearer token check without an early exit on the first differing byte.
bool same_key(const std::string& got, const std::string& want) {
  unsigned diff = got.size() == want.size() ? 0u : 1u;
  for (std::size_t i = 0; i < got.size(); ++i)
    diff |= static_cast<unsigned>(got[i] ^ want[i % std::max<std::size_t>(1, want.size())]);
  return diff == 0;
}

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(seconds));
}

}  // namespace

struct Server::Impl {
  ServeOptions opt;
  Metrics metrics;
  LatencyMetrics latency;
  std::unique_ptr<GenerationQueue> queue;
  std::unique_ptr<HttpServer> http;

  std::atomic<bool> ready{false};
  std::atomic<bool> stopping{false};
  std::unique_ptr<Engine> engine;   ///< set once by load(), before ready
  std::unique_ptr<ApiContext> api;  ///< likewise
  std::string model_id;
  std::int64_t created = 0;

  void handle(HttpRequest req, const std::shared_ptr<Responder>& out);
  void check_key(const HttpRequest& req) const;
  void submit(std::shared_ptr<GenerationJob> job, Responder& out);
  [[nodiscard]] Clock::time_point deadline() const {
    return Clock::now() +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.request_timeout_seconds));
  }
};

void Server::Impl::check_key(const HttpRequest& req) const {
  if (opt.api_key.empty()) return;
  if (req.path.rfind("/v1/", 0) != 0 && req.path != "/metrics") return;
  const std::string auth = req.header("Authorization");
  const std::string prefix = "Bearer ";
  if (auth.rfind(prefix, 0) == 0 && same_key(auth.substr(prefix.size()), opt.api_key)) return;
  throw ApiError(401,
                 auth.empty() ? "You didn't provide an API key (Authorization: Bearer <key>)."
                              : "Incorrect API key provided.",
                 "invalid_request_error", "", "invalid_api_key");
}

void Server::Impl::submit(std::shared_ptr<GenerationJob> job, Responder& out) {
  try {
    queue->submit(std::move(job));
  } catch (const ApiError& e) {
    reply_error(out, e);
  }
}

// On the HTTP layer's I/O thread: every answer here is quick, the generations go to the queue.
void Server::Impl::handle(HttpRequest req, const std::shared_ptr<Responder>& out) {
  try {
    const bool get = req.method == "GET", post = req.method == "POST";
    if (get && req.path == "/health") {
      const bool ok = ready.load() && !stopping.load();
      out->reply(ok ? 200 : 503, "application/json",
                 json{{"status", ok                ? "ok"
                                 : stopping.load() ? "stopping"
                                                   : "loading"}}
                     .dump());
      return;
    }
    check_key(req);
    if (get && req.path == "/metrics") {
      const bool loaded = ready.load();
      out->reply(200, "text/plain; version=0.0.4",
                 metrics.render(loaded) + latency.render(loaded ? engine->stats() : EngineStats{}));
    } else if (get && req.path == "/v1/models") {
      if (!ready.load()) throw ApiError(503, "The model is still loading.", "server_error", "", "model_loading");
      const json entry = {{"id", model_id}, {"object", "model"}, {"created", created}, {"owned_by", "k3host"}};
      out->reply(200, "application/json", json{{"object", "list"}, {"data", json::array({entry})}}.dump());
    } else if (post && req.path == "/v1/chat/completions") {
      if (!ready.load()) throw ApiError(503, "The model is still loading.", "server_error", "", "model_loading");
      ChatRequest cr = parse_chat_request(req.body, opt.default_max_tokens, engine->runtime().thinking());
      submit(chat_job(*api, std::move(cr), out, deadline()), *out);
    } else if (post && req.path == "/v1/completions") {
      if (!ready.load()) throw ApiError(503, "The model is still loading.", "server_error", "", "model_loading");
      CompletionRequest cr = parse_completion_request(req.body, opt.default_max_tokens);
      submit(completion_job(*api, std::move(cr), out, deadline()), *out);
    } else {
      throw ApiError(404, "Unknown route: " + req.method + " " + req.path, "invalid_request_error", "", "unknown_url");
    }
  } catch (const ApiError& e) {
    reply_error(*out, e);
  } catch (const std::exception& e) {
    log(LogLevel::error, "serve", std::string("request failed: ") + e.what());
    reply_error(*out, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
  }
}

Server::Server(ServeOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.opt = std::move(options);
  check_options(s.opt);
  const BindAddress address = resolve_bind_address(s.opt.host);
  if (!address.loopback && s.opt.api_key.empty())
    throw UsageError("refusing to listen on " + s.opt.host +
                     " without an API key: a non-loopback address needs --api-key or K3_API_KEY");
  HttpOptions h;
  h.host = s.opt.host;
  h.port = s.opt.port;
  h.limits = {s.opt.max_header_bytes, s.opt.max_header_fields, s.opt.max_body_bytes};
  h.header_timeout = millis(s.opt.header_timeout_seconds);
  h.read_timeout = millis(s.opt.read_timeout_seconds);
  h.write_timeout = millis(s.opt.write_timeout_seconds);
  h.max_client_connections = s.opt.max_client_connections;
  h.max_connections = s.opt.max_connections;
  h.error_body = [](const HttpRefusal& r) {
    return error_body(ApiError(r.status, r.message,
                               r.status >= 500   ? "server_error"
                               : r.status == 429 ? "rate_limit_error"
                                                 : "invalid_request_error",
                               "", r.code));
  };
  s.queue = std::make_unique<GenerationQueue>(s.opt.queue, s.opt.request_timeout_seconds, s.metrics, s.latency);
  s.http = std::make_unique<HttpServer>(std::move(h), [&s](HttpRequest req, std::shared_ptr<Responder> out) {
    s.handle(std::move(req), out);
  });
  s.created = static_cast<std::int64_t>(std::time(nullptr));
}

Server::~Server() {
  stop();
  wait();
}

int Server::port() const noexcept { return impl_->http->port(); }

std::string Server::url() const { return http_url(impl_->http->address(), impl_->http->port()); }

void Server::start() { impl_->http->start(); }

void Server::load(const Pipeline& pipeline, PluginHost& host, const LoadHooks& hooks) {
  Impl& s = *impl_;
  // The plan holds serve.parallel sequences' state and KV (docs/serve.md, "Concurrency").
  auto runtime = std::make_unique<Runtime>(pipeline, host, hooks, RunSequences::batched);
  const GenerateSettings defaults = generate_settings_of(pipeline, *runtime);
  if (s.opt.model_name.empty()) {
    std::string uri = runtime->model_uri();
    while (uri.size() > 1 && uri.back() == '/') uri.pop_back();
    const auto slash = uri.find_last_of('/');
    s.model_id = slash == std::string::npos ? uri : uri.substr(slash + 1);
  } else {
    s.model_id = s.opt.model_name;
  }
  const std::string thinking_from = pipeline.get_string("model.thinking") == "auto"
                                        ? runtime->model_uri() + "/config.json says k3host_thinking: false"
                                        : "model.thinking: off, " + pipeline.where("model.thinking");
  const bool thinking = runtime->thinking();
  s.engine = std::make_unique<Engine>(std::move(runtime), defaults, s.opt, &s.latency);
  if (!thinking)
    log(LogLevel::info, "serve",
        "chat replies think only when a request sends reasoning_effort (" + thinking_from + ")");
  s.api = std::make_unique<ApiContext>(*s.engine, s.metrics, s.model_id);
  s.metrics.set_loaded(s.engine->runtime().model().stream_stats(), s.engine->runtime().load_seconds(),
                       !s.engine->runtime().model().streaming());
  s.queue->start(s.engine->parallel());
  s.ready.store(true);
}

void Server::stop() {
  Impl& s = *impl_;
  s.stopping.store(true);
  s.queue->stop();
  s.http->stop();
}

void Server::wait() {
  Impl& s = *impl_;
  s.queue->join();
  s.http->wait();
}

bool Server::stopping() const noexcept { return impl_->stopping.load(); }

}  // namespace k3::serve
