// `k3host serve`: an OpenAI-compatible HTTP server over one pipeline's model (docs/serve.md).
//
//   k3::serve::Server server(options);        // checks the options, binds the address
//   server.start();                           // answers /health (503) at once
//   server.load(pipeline, host, hooks);       // loads the model; /health turns 200
//   ...                                       // until stop() (a signal, from any thread)
//   server.wait();
//
// Up to serve.parallel requests are decoded together (one forward pass per step over all of
// them, each reply the one it gets alone: docs/batching.md); up to `queue` more wait for a
// slot in order, and one more is refused with 429. A conversation that continues an earlier one
// resumes from a snapshot of the session state (prefix reuse) instead of prefilling again.
// Every client meets the HTTP limits (header size, field count and time, body size,
// connections per address and in all) before any route or API key is looked at.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <k3/pipeline.hpp>
#include <k3/plugin_host.hpp>
#include <k3/runtime.hpp>

namespace k3::serve {

/// Every option's range is checked by Server (UsageError naming the command-line flag);
/// docs/serve.md lists them.
struct ServeOptions {
  /// The address to listen on: an IPv4 or IPv6 literal (brackets optional) or a name. Anything
  /// but a loopback address (127.0.0.0/8, ::1, localhost) is refused (UsageError) unless
  /// api_key is set.
  std::string host = "127.0.0.1";
  int port = 8080;  ///< 0: any free port (Server::port() tells which)
  /// Clients must send "Authorization: Bearer <api_key>" to /v1/* and /metrics; empty: no
  /// key. Never logged.
  std::string api_key;
  /// The model id of /v1/models and the responses; empty: the checkpoint folder's name.
  std::string model_name;
  std::size_t queue = 4;                    ///< requests that may wait for a sequence slot, 0..256
  std::size_t max_body_bytes = 1u << 20;    ///< larger request bodies get 413
  double header_timeout_seconds = 10;       ///< receiving the request line and every header field
  double read_timeout_seconds = 30;         ///< receiving a request's body
  double write_timeout_seconds = 30;        ///< writing a piece of a response
  double request_timeout_seconds = 600;     ///< queue wait + generation of one request
  std::size_t max_header_bytes = 16384;     ///< request line + header fields; more gets 431
  std::size_t max_header_fields = 100;      ///< more header fields get 431
  std::size_t max_client_connections = 16;  ///< open at once from one address; more are refused (429)
  std::size_t max_connections = 256;        ///< open at once in all; more are refused (503)
  std::int64_t default_max_tokens = 256;    ///< when a request gives no max_tokens
  /// Prefix reuse (docs/serve.md, "Prefix reuse"): snapshots of the session state at turn
  /// boundaries and every snapshot_interval tokens, within snapshot_budget_bytes (least
  /// recently used dropped first; unset: room for 4 snapshots of a full context, which the
  /// server logs; 0: only the live session is reused). reuse=false prefills every request
  /// from scratch (for measuring and for the exactness tests).
  bool reuse = true;
  std::optional<std::size_t> snapshot_budget_bytes;
  std::int64_t snapshot_interval = 512;
};

/// True for 127.0.0.0/8, ::1 (with or without brackets, or v4-mapped) and "localhost".
bool is_loopback(const std::string& host);

class Server {
 public:
  /// Checks the options (UsageError: a non-loopback host without an API key, a value out
  /// of its range) and binds the address (RuntimeError when it cannot be bound: "address in
  /// use" when another server listens there; the port is never shared).
  explicit Server(ServeOptions options);
  ~Server();  ///< stops and joins
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// The port bound (the chosen one when options.port was 0).
  [[nodiscard]] int port() const noexcept;
  /// "http://127.0.0.1:8080", "http://[::1]:8080": the address bound and its port.
  [[nodiscard]] std::string url() const;
  /// Starts answering on a background thread; until load() finishes, /health is 503 and
  /// the model endpoints answer 503 too.
  void start();
  /// Loads the pipeline's runtime (k3::Runtime, its plan holding serve.parallel sequences)
  /// on the calling thread; its errors propagate (the server keeps answering 503 then). The
  /// generation settings (prefill chunk, EOS, drafting) come from the pipeline's job section.
  void load(const Pipeline& pipeline, PluginHost& host, const LoadHooks& hooks = {});
  /// Stops listening, cancels the running generations (they end at their next token) and
  /// refuses the waiting requests with 503. Safe from any thread, more than once; not from a
  /// signal handler (set a flag there and call this from a thread).
  void stop();
  /// Blocks until the server has stopped (stop()) and every request handler has returned.
  void wait();
  /// True once stop() was called.
  [[nodiscard]] bool stopping() const noexcept;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace k3::serve
