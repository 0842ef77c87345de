// The HTTP/1.1 server of `k3host serve` on Boost.Beast (http_server.hpp). One I/O thread
// runs every connection asynchronously, so a client that sends slowly holds a socket and a
// few kB, never a thread. Each connection, in order:
//   read the request line and header within header_timeout and header_bytes (Beast's
//   parser), check its fields (check_head), read the body within read_timeout and
//   body_bytes, then hand the request to the handler; while it is answered, keep a read
//   open to learn at once when the client resets or closes (then probe with filler writes
//   until a write fails or the reply ends), and write what the responder queues, each write
//   within write_timeout; then read the next request (keep-alive) or close.
// A refusal of the HTTP layer is written with "Connection: close", the sending side is shut
// and what the client still sends is read and dropped for a moment (so the client reads the
// refusal rather than a reset).
#include "serve/http_server.hpp"

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <k3/error.hpp>
#include <k3/log.hpp>

namespace k3::serve {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {

constexpr const char* kComponent = "serve";
/// Unwritten response bytes a writer may queue before write() waits for the client.
constexpr std::size_t kMaxPendingBytes = 256 * 1024;
/// After a client closed its side: how often the filler is written to learn whether it is
/// still there.
constexpr auto kProbeInterval = std::chrono::milliseconds(100);
/// After a refusal: how long, and how much, of what the client still sends is dropped.
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr std::size_t kLingerBytes = 1u << 20;

std::string serialize(const http::response<http::string_body>& res) {
  std::ostringstream os;
  os << res;
  return os.str();
}

std::string serialize_header(const http::response<http::empty_body>& res) {
  std::ostringstream os;
  os << res.base();
  return os.str();
}

std::string chunk(std::string_view data) {
  char size[32];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string out;
  out.reserve(static_cast<std::size_t>(n) + data.size() + 2);
  out.append(size, static_cast<std::size_t>(n)).append(data).append("\r\n");
  return out;
}

}  // namespace

class Connection;

/// The server's shared state: the acceptor, the I/O thread, the connection counts.
struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  HttpOptions opt;
  HttpHandler handler;
  BindAddress address;
  int port = 0;
  net::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  net::steady_timer accept_retry{ioc};
  std::thread io;
  std::atomic<bool> stopping{false};

  std::mutex m;  ///< guards the counts and the list below (connections end on any thread)
  std::map<std::string, std::size_t> per_client;
  std::size_t connections = 0;
  std::list<std::weak_ptr<Connection>> live;

  void accept();
  void on_accept(const error_code& ec, tcp::socket socket);
  void refuse_connection(tcp::socket& socket, const HttpRefusal& refusal);

  /// A whole error response that closes the connection.
  [[nodiscard]] std::string refusal_bytes(const HttpRefusal& r) const {
    http::response<http::string_body> res{static_cast<http::status>(r.status), 11};
    res.set(http::field::content_type, opt.error_body ? "application/json" : "text/plain");
    res.keep_alive(false);
    res.body() = opt.error_body ? opt.error_body(r) : r.message + "\n";
    res.prepare_payload();
    return serialize(res);
  }
};

/// What the connection writes, in order (a filler: a probe of a client that closed its side).
enum class OutKind { whole, header, chunk, filler, last };

/// What a handler answers through (Responder): the bytes are formed here and handed to the
/// connection's strand; what a writer waits on (unwritten bytes, gone) is under a mutex.
class ConnectionResponder final : public Responder {
 public:
  ConnectionResponder(std::shared_ptr<Connection> conn, net::any_io_executor strand, std::string client,
                      bool keep_alive, net::io_context& ioc)
      : conn_(std::move(conn)),
        strand_(std::move(strand)),
        client_(std::move(client)),
        keep_alive_(keep_alive),
        work_(net::make_work_guard(ioc)) {}
  ~ConnectionResponder() override;

  void reply(int status, std::string_view content_type, std::string body, HttpHeaders extra) override;
  void start(int status, std::string_view content_type, HttpHeaders extra, std::string filler) override;
  bool write(std::string data) override;
  void finish() override;
  [[nodiscard]] bool gone() const override {
    std::lock_guard lock(m_);
    return gone_;
  }
  void on_gone(std::function<void()> callback) override;
  [[nodiscard]] const std::string& client() const override { return client_; }

  // From the connection, on its strand.
  void mark_gone();
  void written(std::size_t bytes) {
    {
      std::lock_guard lock(m_);
      pending_ -= std::min(pending_, bytes);
    }
    cv_.notify_all();
  }

 private:
  void send(std::string bytes, OutKind kind, std::string filler = {});
  std::shared_ptr<Connection> conn_;
  net::any_io_executor strand_;
  std::string client_;
  bool keep_alive_;
  net::executor_work_guard<net::io_context::executor_type> work_;  ///< the I/O thread runs until this is answered
  mutable std::mutex m_;
  std::condition_variable cv_;
  bool gone_ = false;
  bool answered_ = false;  ///< reply() or start() was called
  bool started_ = false, finished_ = false;
  std::size_t pending_ = 0;
  std::function<void()> on_gone_;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<HttpServer::Impl> server, tcp::socket socket, std::string client)
      : server_(std::move(server)),
        stream_(std::move(socket)),
        client_(std::move(client)),
        probe_timer_(stream_.get_executor()) {}
  ~Connection() {
    std::lock_guard lock(server_->m);
    --server_->connections;
    if (--server_->per_client[client_] == 0) server_->per_client.erase(client_);
  }

  void run() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_request(); });
  }

  /// The server stops: a connection between requests closes now; one being answered
  /// closes when its response ends.
  void on_server_stop() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      self->keep_alive_ = false;
      if (!self->answering_) self->close();
    });
  }

  /// From the responder, on the strand: bytes of the current response.
  void enqueue(std::string bytes, OutKind kind, std::string filler) {
    if (closed_ || !answering_) return;
    if (kind == OutKind::header) {
      streaming_ = true;
      filler_ = std::move(filler);
    }
    out_.push_back({std::move(bytes), kind == OutKind::chunk});
    if (kind == OutKind::whole || kind == OutKind::last) last_queued_ = true;
    if (!writing_) write_next();
  }
  /// The responder went away without an answer (500) or in the middle of a stream (cut).
  void abandoned(bool mid_stream) {
    if (closed_ || !answering_ || last_queued_) return;
    if (mid_stream) return close();
    enqueue(server_->refusal_bytes({500, "The server ended this request without an answer.", ""}), OutKind::whole, {});
  }

 private:
  struct Out {
    std::string bytes;
    bool counted;  ///< counted in the responder's unwritten bytes
  };

  void read_request() {
    if (closed_) return;
    if (server_->stopping.load()) return close();
    parser_.emplace();
    configure(*parser_, server_->opt.limits);
    stream_.expires_after(server_->opt.header_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](error_code ec, std::size_t) { self->on_header(ec); });
  }

  void on_header(const error_code& ec) {
    if (ec) {
      // Nothing sent, or the client went away between requests: no answer needed. A
      // timeout has closed the socket already (Beast's stream does on expiry).
      if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::operation_aborted ||
          ec == net::error::connection_reset)
        return close();
      return refuse(refusal_of(ec, server_->opt.limits));
    }
    if (auto refusal = check_head(*parser_, server_->opt.limits)) return refuse(*refusal);
    if (parser_->is_done()) return dispatch();
    if (beast::iequals(parser_->get()[http::field::expect], "100-continue")) {
      // The client waits for this before it sends the body (curl does, for a large one).
      current_ = "HTTP/1.1 100 Continue\r\n\r\n";
      stream_.expires_after(server_->opt.write_timeout);
      net::async_write(stream_, net::buffer(current_), [self = shared_from_this()](error_code e, std::size_t) {
        if (e) return self->close();
        self->read_body();
      });
      return;
    }
    read_body();
  }

  void read_body() {
    stream_.expires_after(server_->opt.read_timeout);
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](error_code ec, std::size_t) {
      if (!ec) return self->dispatch();
      if (ec == beast::error::timeout || ec == http::error::end_of_stream || ec == http::error::partial_message ||
          ec == net::error::connection_reset || ec == net::error::operation_aborted)
        return self->close();
      self->refuse(refusal_of(ec, self->server_->opt.limits));
    });
  }

  void dispatch() {
    HttpRequest req = request_of(*parser_);
    keep_alive_ = req.keep_alive && !server_->stopping.load();
    parser_.reset();
    answering_ = true;
    streaming_ = false;
    last_queued_ = false;
    peer_eof_ = false;
    auto responder = std::make_shared<ConnectionResponder>(shared_from_this(), stream_.get_executor(), client_,
                                                           keep_alive_, server_->ioc);
    responder_ = responder;
    stream_.expires_never();
    watch();
    try {
      server_->handler(std::move(req), responder);
    } catch (const std::exception& e) {
      log(LogLevel::error, kComponent, std::string("request failed: ") + e.what());
    }
  }

  /// While a request is answered: a read that ends when the client closes or resets (or
  /// pipelines its next request, which is kept for later). On the raw socket, so the write
  /// timer of Beast's stream never cuts it.
  void watch() {
    if (closed_ || watching_ || peer_eof_) return;
    if (buffer_.size() >= server_->opt.limits.header_bytes) return;  // enough pipelined; stop reading
    watching_ = true;
    stream_.socket().async_read_some(buffer_.prepare(4096),
                                     net::bind_executor(stream_.get_executor(),
                                                        [self = shared_from_this()](error_code ec, std::size_t n) {
      self->on_watch(ec, n);
                                     }));
  }

  void on_watch(const error_code& ec, std::size_t n) {
    watching_ = false;
    if (!ec) buffer_.commit(n);
    if (resume_after_watch_) {  // the response ended and the read was cancelled for the next request
      resume_after_watch_ = false;
      if (!ec || ec == net::error::operation_aborted) return read_request();
    }
    if (ec == net::error::eof) {
      // Closed for writing, or altogether: only a write can tell. Probe until it is known.
      peer_eof_ = true;
      return probe();
    }
    if (ec) return gone();
    watch();
  }

  void probe() {
    if (closed_ || !answering_) return;
    if (streaming_ && !writing_ && !last_queued_) enqueue(chunk(filler_), OutKind::filler, {});
    probe_timer_.expires_after(kProbeInterval);
    probe_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->probe();
    });
  }

  void write_next() {
    if (out_.empty()) {
      writing_ = false;
      if (last_queued_) response_done();
      return;
    }
    writing_ = true;
    // Everything queued goes out in one write.
    current_.clear();
    current_counted_ = 0;
    while (!out_.empty()) {
      current_ += out_.front().bytes;
      if (out_.front().counted) current_counted_ += out_.front().bytes.size();
      out_.pop_front();
    }
    stream_.expires_after(server_->opt.write_timeout);  // the write's deadline
    net::async_write(stream_, net::buffer(current_), [self = shared_from_this()](error_code ec, std::size_t) {
      if (ec) return self->gone();
      if (auto r = self->responder_.lock()) r->written(self->current_counted_);
      self->write_next();
    });
  }

  void response_done() {
    answering_ = false;
    streaming_ = false;
    last_queued_ = false;
    probe_timer_.cancel();
    responder_.reset();
    if (!keep_alive_ || peer_eof_ || server_->stopping.load()) return graceful_close();
    if (watching_) {
      resume_after_watch_ = true;
      error_code ignored;
      stream_.socket().cancel(ignored);
      return;
    }
    read_request();
  }

  /// The client is gone: tell the responder (its generation stops) and close.
  void gone() {
    if (auto r = responder_.lock()) r->mark_gone();
    close();
  }

  void refuse(const HttpRefusal& r) {
    log(LogLevel::debug, kComponent, client_ + ": refused " + std::to_string(r.status) + ": " + r.message);
    current_ = server_->refusal_bytes(r);
    writing_ = true;
    stream_.expires_after(server_->opt.write_timeout);
    net::async_write(stream_, net::buffer(current_), [self = shared_from_this()](error_code ec, std::size_t) {
      self->writing_ = false;
      if (ec) return self->close();
      self->graceful_close();
    });
  }

  /// Shuts the sending side, then reads and drops what the client still sends (bounded in
  /// time and bytes) before closing, so that it reads our last response, not a reset.
  void graceful_close() {
    if (closed_) return;
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(kLingerTime);
    linger_left_ = kLingerBytes;
    drain();
  }

  void drain() {
    stream_.async_read_some(net::buffer(drain_buffer_), [self = shared_from_this()](error_code ec, std::size_t n) {
      if (ec || n >= self->linger_left_) return self->close();
      self->linger_left_ -= n;
      self->drain();
    });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    probe_timer_.cancel();
    if (auto r = responder_.lock()) r->mark_gone();
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  std::shared_ptr<HttpServer::Impl> server_;
  beast::tcp_stream stream_;
  std::string client_;
  beast::flat_buffer buffer_;
  std::optional<RequestParser> parser_;
  std::weak_ptr<ConnectionResponder> responder_;
  net::steady_timer probe_timer_;
  std::deque<Out> out_;
  std::string current_;
  std::size_t current_counted_ = 0;
  std::string filler_;
  std::array<char, 4096> drain_buffer_{};
  std::size_t linger_left_ = 0;
  bool keep_alive_ = true;
  bool answering_ = false;  ///< a request was handed to the handler and its response has not ended
  bool streaming_ = false;  ///< the response's header went out chunked
  bool writing_ = false;
  bool watching_ = false;
  bool peer_eof_ = false;
  bool last_queued_ = false;
  bool resume_after_watch_ = false;
  bool closed_ = false;
};

// ---------------------------------------------------------------------------------------

ConnectionResponder::~ConnectionResponder() {
  bool unanswered = false, cut = false;
  {
    std::lock_guard lock(m_);
    unanswered = !answered_;
    cut = started_ && !finished_;
  }
  if (unanswered || cut) net::post(strand_, [c = conn_, cut] { c->abandoned(cut); });
}

void ConnectionResponder::send(std::string bytes, OutKind kind, std::string filler) {
  net::post(strand_, [c = conn_, b = std::move(bytes), kind, f = std::move(filler)]() mutable {
    c->enqueue(std::move(b), kind, std::move(f));
  });
}

void ConnectionResponder::reply(int status, std::string_view content_type, std::string body, HttpHeaders extra) {
  {
    std::lock_guard lock(m_);
    if (answered_) return;
    answered_ = true;
    if (gone_) return;
  }
  http::response<http::string_body> res{static_cast<http::status>(status), 11};
  res.set(http::field::content_type, std::string(content_type));
  for (auto& [k, v] : extra) res.set(k, v);
  res.keep_alive(keep_alive_);
  res.body() = std::move(body);
  res.prepare_payload();
  send(serialize(res), OutKind::whole);
}

void ConnectionResponder::start(int status, std::string_view content_type, HttpHeaders extra, std::string filler) {
  {
    std::lock_guard lock(m_);
    if (answered_) return;
    answered_ = true;
    started_ = true;
    if (gone_) return;
  }
  http::response<http::empty_body> res{static_cast<http::status>(status), 11};
  res.set(http::field::content_type, std::string(content_type));
  for (auto& [k, v] : extra) res.set(k, v);
  res.keep_alive(keep_alive_);
  res.chunked(true);
  send(serialize_header(res), OutKind::header, std::move(filler));
}

bool ConnectionResponder::write(std::string data) {
  if (data.empty()) return !gone();
  std::string bytes = chunk(data);
  {
    std::unique_lock lock(m_);
    cv_.wait(lock, [&] { return gone_ || pending_ < kMaxPendingBytes; });
    if (gone_) return false;
    if (!started_ || finished_) return true;
    pending_ += bytes.size();
  }
  send(std::move(bytes), OutKind::chunk);
  return true;
}

void ConnectionResponder::finish() {
  {
    std::lock_guard lock(m_);
    if (!started_ || finished_) return;
    finished_ = true;
    if (gone_) return;
  }
  send("0\r\n\r\n", OutKind::last);
}

void ConnectionResponder::on_gone(std::function<void()> callback) {
  bool now = false;
  {
    std::lock_guard lock(m_);
    if (gone_)
      now = true;
    else
      on_gone_ = std::move(callback);
  }
  if (now && callback) callback();
}

void ConnectionResponder::mark_gone() {
  std::function<void()> cb;
  {
    std::lock_guard lock(m_);
    if (gone_) return;
    gone_ = true;
    cb = std::move(on_gone_);
  }
  cv_.notify_all();
  if (cb) cb();
}

// ---------------------------------------------------------------------------------------

void HttpServer::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [self = shared_from_this()](error_code ec, tcp::socket socket) {
    self->on_accept(ec, std::move(socket));
  });
}

void HttpServer::Impl::refuse_connection(tcp::socket& socket, const HttpRefusal& refusal) {
  // One non-blocking write of the whole (small) answer, then close: a refused client costs
  // no more than this.
  log(LogLevel::debug, kComponent, "refused a connection: " + refusal.message);
  const std::string bytes = refusal_bytes(refusal);
  error_code ignored;
  socket.non_blocking(true, ignored);
  socket.write_some(net::buffer(bytes), ignored);
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
}

void HttpServer::Impl::on_accept(const error_code& ec, tcp::socket socket) {
  if (stopping.load() || ec == net::error::operation_aborted) return;
  if (ec) {
    // Out of descriptors, or the like: try again shortly instead of spinning.
    log(LogLevel::warn, kComponent, "accepting a connection failed: " + ec.message());
    accept_retry.expires_after(std::chrono::milliseconds(100));
    accept_retry.async_wait([self = shared_from_this()](error_code e) {
      if (!e && !self->stopping.load()) self->accept();
    });
    return;
  }
  error_code e;
  const tcp::endpoint remote = socket.remote_endpoint(e);
  if (e) {
    accept();
    return;
  }
  std::string client = remote.address().to_string();
  std::shared_ptr<Connection> conn;
  {
    std::lock_guard lock(m);
    if (connections >= opt.max_connections) {
      refuse_connection(socket, {503, "The server has " + std::to_string(connections) + " connections open, its limit.",
                                 "too_many_connections"});
    } else if (per_client[client] >= opt.max_client_connections) {
      refuse_connection(socket, {429,
                                 "Too many connections from " + client + " (at most " +
                                     std::to_string(opt.max_client_connections) + " at once).",
                                 "too_many_connections"});
      if (per_client[client] == 0) per_client.erase(client);
    } else {
      ++connections;
      ++per_client[client];
      conn = std::make_shared<Connection>(shared_from_this(), std::move(socket), client);
      live.remove_if([](const std::weak_ptr<Connection>& w) { return w.expired(); });
      live.push_back(conn);
    }
  }
  if (conn) conn->run();
  accept();
}

// ---------------------------------------------------------------------------------------

namespace {

std::string unbracketed(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') return host.substr(1, host.size() - 2);
  return host == "localhost" ? "127.0.0.1" : host;
}

bool address_is_loopback(const net::ip::address& a) {
  return a.is_loopback() || (a.is_v6() && a.to_v6().is_v4_mapped() &&
                             net::ip::make_address_v4(net::ip::v4_mapped, a.to_v6()).is_loopback());
}

}  // namespace

bool literal_is_loopback(const std::string& host) {
  error_code ec;
  const net::ip::address a = net::ip::make_address(unbracketed(host), ec);
  return !ec && address_is_loopback(a);
}

BindAddress resolve_bind_address(const std::string& host) {
  const std::string h = unbracketed(host);
  error_code ec;
  net::ip::address a = net::ip::make_address(h, ec);
  if (ec) {
    net::io_context ioc;
    tcp::resolver resolver(ioc);
    const auto results = resolver.resolve(h, "", tcp::resolver::passive | tcp::resolver::address_configured, ec);
    if (ec || results.empty())
      throw UsageError("--host " + host + ": not an IP address, and it does not resolve (" +
                       (ec ? ec.message() : std::string("no address")) + ")");
    a = results.begin()->endpoint().address();
  }
  BindAddress out;
  out.address = a.to_string();
  out.v6 = a.is_v6();
  out.loopback = address_is_loopback(a);
  return out;
}

std::string http_url(const BindAddress& address, int port) {
  return "http://" + (address.v6 ? "[" + address.address + "]" : address.address) + ":" + std::to_string(port);
}

HttpServer::HttpServer(HttpOptions options, HttpHandler handler) : impl_(std::make_shared<Impl>()) {
  Impl& s = *impl_;
  s.opt = std::move(options);
  s.handler = std::move(handler);
  s.address = resolve_bind_address(s.opt.host);
  const tcp::endpoint ep(net::ip::make_address(s.address.address), static_cast<unsigned short>(s.opt.port));
  const std::string where = http_url(s.address, s.opt.port);
  error_code ec;
  s.acceptor.open(ep.protocol(), ec);
  if (ec) throw RuntimeError("cannot listen on " + where + ": " + ec.message());
  // SO_REUSEADDR only (a restarted server binds while old connections linger); never
  // SO_REUSEPORT, with which a second server on the port would split the clients with this one.
  s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  s.acceptor.bind(ep, ec);
  if (ec == net::error::address_in_use)
    throw RuntimeError("cannot listen on " + where + ": address in use (another server on that port?)");
  if (ec) throw RuntimeError("cannot listen on " + where + ": " + ec.message());
  s.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw RuntimeError("cannot listen on " + where + ": " + ec.message());
  s.port = s.acceptor.local_endpoint().port();
}

HttpServer::~HttpServer() {
  stop();
  wait();
}

int HttpServer::port() const noexcept { return impl_->port; }
const BindAddress& HttpServer::address() const noexcept { return impl_->address; }

void HttpServer::start() {
  Impl& s = *impl_;
  if (s.io.joinable()) return;
  s.accept();
  s.io = std::thread([&s] {
    for (;;) {
      try {
        s.ioc.run();
        return;
      } catch (const std::exception& e) {
        log(LogLevel::error, kComponent, std::string("HTTP I/O: ") + e.what());
      }
    }
  });
}

void HttpServer::stop() {
  Impl& s = *impl_;
  if (s.stopping.exchange(true)) return;
  if (!s.io.joinable()) {  // never started: nothing runs on the I/O context
    error_code ignored;
    s.acceptor.close(ignored);
    return;
  }
  net::post(s.ioc, [self = impl_] {
    error_code ignored;
    self->acceptor.close(ignored);
    self->accept_retry.cancel();
    std::list<std::weak_ptr<Connection>> live;
    {
      std::lock_guard lock(self->m);
      live = self->live;
    }
    for (auto& w : live)
      if (auto c = w.lock()) c->on_server_stop();
  });
}

void HttpServer::wait() {
  Impl& s = *impl_;
  if (s.io.joinable()) s.io.join();
}

}  // namespace k3::serve
