// k3host serve: an OpenAI-compatible HTTP server over the pipeline's model (docs/serve.md).
//
//   k3host serve [--config PIPELINE] [--set k=v]... [--host 127.0.0.1] [--port 8080]
//                [--api-key KEY | K3_API_KEY=KEY] [--queue 4] [--max-body 1048576] ...
//
// It listens first (GET /health answers 503 while the model loads), then loads the model.
// SIGINT/SIGTERM stop it: it stops listening, ends the running generation at its next token,
// answers the waiting requests 503, and exits 0. A second signal exits at once with 5.
// Exit codes: 0 stopped by a signal; 1 the address cannot be bound or a runtime failure; 2 a
// bad option or pipeline (a non-loopback --host without an API key); 3 the plan does not fit.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <k3/error.hpp>
#include <k3/log.hpp>
#include <k3/pipeline.hpp>
#include <k3/plugin_host.hpp>
#include <k3/serve.hpp>

#include "cli.hpp"
#include "stop_signal.hpp"

namespace k3::cli {
namespace {

struct ServeCli {
  serve::ServeOptions opt;
  double budget_mb = -1;  ///< < 0: the library's default (4 full-context snapshots)
  bool no_reuse = false;
};

int run_serve(const GlobalOptions& global, ServeCli cli) {
  serve::ServeOptions opt = cli.opt;
  if (opt.api_key.empty())
    if (const char* env = std::getenv("K3_API_KEY"); env != nullptr) opt.api_key = env;
  if (cli.budget_mb >= 0) opt.snapshot_budget_bytes = static_cast<std::size_t>(cli.budget_mb * 1e6);
  opt.reuse = !cli.no_reuse;
  const Pipeline pipeline =
      load_pipeline(global.config.empty() ? default_pipeline_file() : std::filesystem::path(global.config), global.overrides);

  StopSignal signal;  // from here on, Ctrl-C stops the server
  serve::Server server(opt);
  server.start();
  log(LogLevel::info, "serve",
      "listening on http://" + opt.host + ":" + std::to_string(server.port()) +
          (opt.api_key.empty() ? "" : " (API key required)") + "; loading the model");
  // The stop flag is watched by a thread of our own: stop() must not run in a signal handler.
  std::thread watcher([&] {
    while (!signal.requested() && !server.stopping()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    server.stop();
  });
  struct Join {
    serve::Server& s;
    std::thread& t;
    ~Join() {
      s.stop();
      if (t.joinable()) t.join();
    }
  } join{server, watcher};

  PluginHost host(pipeline.plugin_path());
  LoadHooks hooks;
  hooks.on_status = [](const std::string& s) { log(LogLevel::info, "", s); };
  hooks.on_plan = [](const std::string& table) { log_text(LogLevel::info, table); };
  server.load(pipeline, host, hooks);
  log(LogLevel::info, "serve", "ready on http://" + opt.host + ":" + std::to_string(server.port()));
  while (!signal.requested() && !server.stopping()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  log(LogLevel::info, "serve", "stopping: no new requests, the running generation ends at its next token");
  server.stop();
  server.wait();
  log(LogLevel::info, "serve", "stopped");
  return 0;
}

}  // namespace

Command register_serve(CLI::App& app, GlobalOptions& global) {
  auto* sub = app.add_subcommand("serve", "Serve the pipeline's model over an OpenAI-compatible HTTP API (docs/serve.md)");
  auto cli = std::make_shared<ServeCli>();
  serve::ServeOptions& o = cli->opt;
  sub->add_option("--host", o.host, "Address to listen on; a non-loopback one needs an API key")->capture_default_str();
  sub->add_option("--port", o.port, "Port (0 = any free port, printed at start)")->capture_default_str();
  sub->add_option("--api-key", o.api_key, "Require 'Authorization: Bearer KEY' (or set K3_API_KEY)");
  sub->add_option("--model-name", o.model_name, "Model id in /v1/models and responses (default: the checkpoint folder)");
  sub->add_option("--queue", o.queue, "Requests that may wait while one generates; more get 429")->capture_default_str();
  sub->add_option("--max-body", o.max_body_bytes, "Largest request body in bytes (larger: 413)")->capture_default_str();
  sub->add_option("--max-tokens", o.default_max_tokens, "max_tokens of a chat request that gives none")
      ->capture_default_str();
  sub->add_option("--request-timeout", o.request_timeout_seconds, "Seconds a request may wait and generate")
      ->capture_default_str();
  sub->add_option("--read-timeout", o.read_timeout_seconds, "Seconds to read a request")->capture_default_str();
  sub->add_option("--write-timeout", o.write_timeout_seconds, "Seconds to write a response chunk")->capture_default_str();
  sub->add_option("--snapshot-budget-mb", cli->budget_mb,
                  "Memory for prefix-reuse snapshots in MB, 1e6 bytes (default: 4 full-context snapshots; 0: none kept)");
  sub->add_option("--snapshot-interval", o.snapshot_interval, "Also snapshot every N tokens of a long prompt or reply")
      ->capture_default_str();
  sub->add_flag("--no-prefix-reuse", cli->no_reuse, "Prefill every request from scratch (no snapshots, no live reuse)");
  sub->footer("Ctrl-C (SIGINT) or SIGTERM stops the server: it stops listening, the running generation ends at its next "
              "token, waiting requests are answered 503, and it exits 0; a second signal exits at once with 5. Exit "
              "codes: 0 stopped by a signal, 1 the address cannot be bound or a runtime failure, 2 a bad option or "
              "pipeline, 3 the plan does not fit.");
  return {sub, [&global, cli]() { return run_serve(global, *cli); }};
}

}  // namespace k3::cli
