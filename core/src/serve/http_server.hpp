// The HTTP/1.1 side of `k3host serve`, on Boost.Beast: listening, connections, the limits
// every client meets before any route or API key (header size, field count and time, body
// size, connections per address and in all), keep-alive, and writing responses, whole or
// chunked, from any thread. It knows nothing of OpenAI or of the model: a Handler gets each
// complete request and answers it through its Responder, now or later from another thread
// (the generation engine's). docs/serve.md, "Limits before the API key".
#pragma once
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "serve/http_request.hpp"

namespace k3::serve {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

/// What the HTTP layer enforces.
struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  HttpLimits limits;
  std::chrono::milliseconds header_timeout{10000};  ///< the whole request line and header
  std::chrono::milliseconds read_timeout{30000};    ///< the whole body
  std::chrono::milliseconds write_timeout{30000};   ///< each write of a response
  std::size_t max_client_connections = 16;          ///< open at once from one address
  std::size_t max_connections = 256;                ///< open at once in all
  /// The body of a refusal the HTTP layer writes itself (the API's error object).
  std::function<std::string(const HttpRefusal&)> error_body;
};

/// How a request is answered: once whole (reply), or as a chunked stream (start, write...,
/// finish). Thread-safe; the writes happen on the server's I/O thread. Once the client is
/// gone (a write failed or timed out, the connection was reset, or it closed its side and a
/// filler write found nobody there) every call does nothing and gone() is true. A responder
/// dropped without an answer answers 500; one dropped in the middle of a stream closes the
/// connection (the client sees the response cut, never a false end).
class Responder {
 public:
  virtual ~Responder() = default;
  virtual void reply(int status, std::string_view content_type, std::string body, HttpHeaders extra = {}) = 0;
  /// `filler` is written, once the client has closed its side, every 100 ms while the
  /// stream lasts: bytes the body's format ignores (a space before JSON, an SSE comment
  /// line). A client that only half-closed still gets its whole reply; one that is gone
  /// altogether resets the connection at the next filler, and gone() turns true.
  virtual void start(int status, std::string_view content_type, HttpHeaders extra, std::string filler) = 0;
  /// Queues a chunk; blocks while more than a few hundred kB are still unwritten, so a
  /// client that reads slowly slows its generation instead of filling memory. False once
  /// the client is gone.
  virtual bool write(std::string data) = 0;
  virtual void finish() = 0;
  [[nodiscard]] virtual bool gone() const = 0;
  /// Called once, on the I/O thread, when the client is found gone (at once if it already is).
  virtual void on_gone(std::function<void()> callback) = 0;
  /// The client's address, for the log.
  [[nodiscard]] virtual const std::string& client() const = 0;
};

using HttpHandler = std::function<void(HttpRequest, std::shared_ptr<Responder>)>;

/// Turns --host into the address to bind: an IPv4 or IPv6 literal (an IPv6 one with or
/// without brackets), or a name resolved here ("localhost" is 127.0.0.1). UsageError when
/// it is neither.
struct BindAddress {
  std::string address;  ///< the literal bound, without brackets
  bool v6 = false;
  bool loopback = false;
};
BindAddress resolve_bind_address(const std::string& host);

/// True for a loopback literal (127.0.0.0/8, ::1 with or without brackets, v4-mapped
/// 127.x) and "localhost"; a name is not resolved here.
bool literal_is_loopback(const std::string& host);

/// "http://127.0.0.1:8080", "http://[::1]:8080".
std::string http_url(const BindAddress& address, int port);

class HttpServer {
 public:
  /// Binds the address (RuntimeError naming it when it cannot: in use, not ours); the
  /// socket is not shared with another process (no SO_REUSEPORT).
  HttpServer(HttpOptions options, HttpHandler handler);
  ~HttpServer();  ///< stops and joins
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  [[nodiscard]] int port() const noexcept;
  [[nodiscard]] const BindAddress& address() const noexcept;
  /// Starts accepting on the I/O thread.
  void start();
  /// Stops accepting and closes every connection that has no request being answered; those
  /// that have are closed when their response ends. Safe from any thread, more than once.
  void stop();
  /// Returns when the I/O thread has ended (after stop(), once every response ended).
  void wait();

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace k3::serve
