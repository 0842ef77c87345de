// The two OpenAI generations as jobs of the queue (generation_queue.hpp): a chat completion
// and a text completion. When its turn comes a job renders and tokenizes its request, runs
// the engine and writes OpenAI's JSON, whole or as server-sent events, to its Responder.
// A client that goes away (the Responder says so) stops its generation at the next token.
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "serve/engine.hpp"
#include "serve/generation_queue.hpp"
#include "serve/http_server.hpp"
#include "serve/metrics.hpp"
#include "serve/request.hpp"

namespace k3::serve {

/// What a job needs of the server; made when the model is loaded.
struct ApiContext {
  ApiContext(Engine& e, Metrics& m, std::string model) : engine(e), metrics(m), model_id(std::move(model)) {}
  Engine& engine;
  Metrics& metrics;
  std::string model_id;
  std::atomic<std::uint64_t> next_id{1};
  std::mutex record_mutex;            ///< record() runs on every worker (serve.parallel of them)
  std::size_t reported_failures = 0;  ///< expert failures already logged (under record_mutex)

  std::string new_id(const char* prefix) { return std::string(prefix) + std::to_string(next_id++); }
  /// After a run (a worker thread): metrics, the log line, new expert failures.
  void record(const RunResult& r, std::size_t prompt_tokens, const std::string& what);
};

std::shared_ptr<GenerationJob> chat_job(ApiContext& cx, ChatRequest request, std::shared_ptr<Responder> out,
                                        std::chrono::steady_clock::time_point deadline);
std::shared_ptr<GenerationJob> completion_job(ApiContext& cx, CompletionRequest request, std::shared_ptr<Responder> out,
                                              std::chrono::steady_clock::time_point deadline);

/// An ApiError answered as OpenAI's error object.
void reply_error(Responder& out, const ApiError& e);

}  // namespace k3::serve
