// k3host serve: an OpenAI-compatible HTTP server over the pipeline's model (docs/serve.md).
//
//   k3host serve [--config PIPELINE] [--set k=v]... [--host 127.0.0.1] [--port 8080]
//                [--api-key KEY | K3_API_KEY=KEY] [--queue 4] [--max-body 1048576] ...
//
// It listens first (GET /health answers 503 while the model loads), then loads the model.
// Up to --parallel requests are decoded together (docs/batching.md).
// SIGINT/SIGTERM stop it: it stops listening, ends the running generations at their next token,
// answers the waiting requests 503, and exits 0. A second signal exits at once with 5.
// Under mpirun with cluster.transport set, rank 0 serves and the later ranks run their layers
// of every pass (docs/cluster.md); a rank's failure ends the server with that rank's code.
// Exit codes: 0 stopped by a signal; 1 the address cannot be bound or a runtime failure; 2 a
// bad option or pipeline (a non-loopback --host without an API key); 3 the plan does not fit.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <k3/cluster.hpp>
#include <k3/error.hpp>
#include <k3/log.hpp>
#include <k3/pipeline.hpp>
#include <k3/plugin_host.hpp>
#include <k3/runtime.hpp>
#include <k3/serve.hpp>

#include "cli.hpp"
#include "run_job.hpp"
#include "stop_signal.hpp"

namespace k3::cli {
namespace {

/// The counts are read signed (CLI11 would wrap "-1" into a huge unsigned value) and
/// checked by the library's ranges after the sign.
struct ServeCli {
  serve::ServeOptions opt;
  std::int64_t queue = 4, max_body = 1 << 20, max_header_bytes = 16384, max_headers = 100;
  std::int64_t max_connections = 256, max_client_connections = 16;
  double budget_mb = -1;  ///< unset: the library's default (4 full-context snapshots)
  bool budget_given = false;
  bool no_reuse = false;
};

std::size_t count_option(const char* flag, std::int64_t v) {
  if (v < 0) throw UsageError(std::string(flag) + " must not be negative, got " + std::to_string(v));
  return static_cast<std::size_t>(v);
}

/// The pipeline's keys that name files of the batch job: the server writes none of them.
void say_what_is_not_written(const Pipeline& pipeline) {
  std::string ignored;
  for (const char* key : {"job.report", "trace.out", "job.save_state", "job.load_state", "job.dump_logits"}) {
    const std::string value = pipeline.get_string(key);
    if (!value.empty()) ignored += std::string(ignored.empty() ? "" : ", ") + key + " (" + value + ")";
  }
  if (!ignored.empty())
    log(LogLevel::info, "serve",
        "not used by the server, which writes no run report, trace or state: " + ignored +
            "; per-request numbers are in the log and at /metrics");
}

/// The server on this process: one process, or rank 0 of a model split over ranks
/// (`cluster`), whose later ranks run their layers of every pass meanwhile. Returns 0 once
/// stopped by a signal, or the exit code of a rank's failure, which ends the server.
int serve_model(const Pipeline& pipeline, serve::ServeOptions opt, Cluster* cluster) {
  if (cluster != nullptr && opt.reuse) {
    // A snapshot would hold rank 0's layers' state only, and the later ranks follow a
    // sequence forward only: a split model feeds every request's prompt whole.
    opt.reuse = false;
    log(LogLevel::info, "serve",
        "prefix reuse is off: the model is split over " + std::to_string(cluster->size()) +
            " ranks, each holding the state of its own layers; every request's prompt is fed whole");
  }
  StopSignal signal;  // from here on, Ctrl-C stops the server
  int code = 0;
  {
    serve::Server server(opt);
    server.start();
    log(LogLevel::info, "serve",
        "listening on " + server.url() + (opt.api_key.empty() ? "" : " (API key required)") + "; loading the model");
    say_what_is_not_written(pipeline);
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
    // A stop request also cuts a storage wait short (a stalled http read), and a wait for
    // another rank: shutdown does not wait for it beyond the backend's second.
    const StopFlagScope storage_stop(host, &signal.flag());
    const ClusterStopScope cluster_stop(cluster, &signal.flag());
    LoadHooks hooks;
    hooks.on_status = [](const std::string& s) { log(LogLevel::info, "", s); };
    hooks.on_plan = [](const std::string& table) { log_text(LogLevel::info, table); };
    hooks.cluster = cluster;
    server.load(pipeline, host, hooks);
    log(LogLevel::info, "serve", "ready on " + server.url());
    auto rank_failed = [&] { return cluster != nullptr && cluster->failure().has_value(); };
    while (!signal.requested() && !server.stopping() && !rank_failed())
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (rank_failed() && !signal.requested()) {
      // The ranks cannot run another pass: the server ends with the rank's reason and code.
      const Cluster::Failure f = *cluster->failure();
      log(LogLevel::error, "serve", f.reason + "; stopping the server");
      code = f.code;
    } else {
      log(LogLevel::info, "serve", "stopping: no new requests, the running generation ends at its next token");
    }
    server.stop();
    server.wait();
  }  // the server, its model and their threads are gone: only this thread talks to the ranks now
  log(LogLevel::info, "serve", "stopped");
  return code;
}

int run_serve(const GlobalOptions& global, ServeCli cli) {
  serve::ServeOptions opt = cli.opt;
  if (opt.api_key.empty())
    if (const char* env = std::getenv("K3_API_KEY"); env != nullptr) opt.api_key = env;
  opt.queue = count_option("--queue", cli.queue);
  opt.max_body_bytes = count_option("--max-body", cli.max_body);
  opt.max_header_bytes = count_option("--max-header-bytes", cli.max_header_bytes);
  opt.max_header_fields = count_option("--max-headers", cli.max_headers);
  opt.max_connections = count_option("--max-connections", cli.max_connections);
  opt.max_client_connections = count_option("--max-client-connections", cli.max_client_connections);
  if (cli.budget_given) {
    // 1e9 MB (a petabyte) is beyond any machine and far inside size_t.
    if (!std::isfinite(cli.budget_mb) || cli.budget_mb < 0 || cli.budget_mb > 1e9)
      throw UsageError("--snapshot-budget-mb must be a number of MB from 0 to 1e9, got " +
                       std::to_string(cli.budget_mb));
    opt.snapshot_budget_bytes = static_cast<std::size_t>(cli.budget_mb * 1e6);
  }
  opt.reuse = !cli.no_reuse;
  const Pipeline pipeline =
      load_pipeline(global.config.empty() ? default_pipeline_file() : std::filesystem::path(global.config),
                    global.overrides);
  if (pipeline.get_string("cluster.transport") == "none") return serve_model(pipeline, opt, nullptr);
  // Under mpirun: rank 0 serves, the later ranks run their layers of its passes.
  return run_ranks(pipeline, RunSequences::batched,
                   [&](const Pipeline& mine, Cluster& cluster) { return serve_model(mine, opt, &cluster); });
}

}  // namespace

Command register_serve(CLI::App& app, GlobalOptions& global) {
  auto* sub =
      app.add_subcommand("serve", "Serve the pipeline's model over an OpenAI-compatible HTTP API (docs/serve.md)");
  auto cli = std::make_shared<ServeCli>();
  serve::ServeOptions& o = cli->opt;
  sub->add_option(
         "--host", o.host,
         "Address to listen on (IPv4, IPv6 with or without brackets, or a name); a non-loopback one needs an API key")
      ->capture_default_str();
  sub->add_option("--port", o.port, "Port (0 = any free port, printed at start)")->capture_default_str();
  sub->add_option("--api-key", o.api_key, "Require 'Authorization: Bearer KEY' (or set K3_API_KEY)");
  sub->add_option("--model-name", o.model_name,
                  "Model id in /v1/models and responses (default: the checkpoint folder)");
  sub->add_option("--queue", cli->queue,
                  "Requests that may wait while every sequence slot generates, 0..256; more get 429")
      ->capture_default_str();
  sub->add_option("--max-body", cli->max_body, "Largest request body in bytes, up to 256 MiB (larger: 413)")
      ->capture_default_str();
  sub->add_option("--max-tokens", o.default_max_tokens, "max_tokens of a chat request that gives none, 1..1048576")
      ->capture_default_str();
  sub->add_option("--request-timeout", o.request_timeout_seconds,
                  "Seconds a request may wait and generate, at most 604800 (a week)")
      ->capture_default_str();
  sub->add_option("--header-timeout", o.header_timeout_seconds,
                  "Seconds to receive a request's line and header fields, at most 3600")
      ->capture_default_str();
  sub->add_option("--read-timeout", o.read_timeout_seconds, "Seconds to receive a request's body, at most 3600")
      ->capture_default_str();
  sub->add_option("--write-timeout", o.write_timeout_seconds, "Seconds to write a piece of a response, at most 3600")
      ->capture_default_str();
  sub->add_option("--max-header-bytes", cli->max_header_bytes,
                  "Largest request line + header fields in bytes, 256..1048576 (larger: 431)")
      ->capture_default_str();
  sub->add_option("--max-headers", cli->max_headers, "Most header fields in a request, 1..10000 (more: 431)")
      ->capture_default_str();
  sub->add_option("--max-connections", cli->max_connections, "Connections open at once in all, 1..65536 (more: 503)")
      ->capture_default_str();
  sub->add_option("--max-client-connections", cli->max_client_connections,
                  "Connections open at once from one address, 1..--max-connections (more: 429)")
      ->capture_default_str();
  sub->add_option(
         "--snapshot-budget-mb", cli->budget_mb,
         "Memory for prefix-reuse snapshots in MB, 1e6 bytes (default: 4 full-context snapshots; 0: none kept)")
      ->each([cli](const std::string&) { cli->budget_given = true; });
  sub->add_option("--snapshot-interval", o.snapshot_interval, "Also snapshot every N tokens of a long prompt or reply")
      ->capture_default_str();
  sub->add_flag("--no-prefix-reuse", cli->no_reuse, "Prefill every request from scratch (no snapshots, no live reuse)");
  sub->footer(
      "Up to --parallel requests (serve.parallel; 0, the default: as many as the memory plan holds) are "
      "decoded together, one forward pass per step for all of them, each reply the one it gets alone. "
      "Ctrl-C (SIGINT) or SIGTERM stops the server: it stops listening, the running generations end at their next "
      "token, waiting requests are answered 503, and it exits 0; a second signal exits at once with 5. Exit "
      "codes: 0 stopped by a signal, 1 the address cannot be bound or a runtime failure, 2 a bad option or "
      "pipeline, 3 the plan does not fit.");
  return {sub, [&global, cli]() { return run_serve(global, *cli); }};
}

}  // namespace k3::cli
