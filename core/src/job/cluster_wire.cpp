// The messages between ranks over the transport plugin (job/cluster_wire.hpp).
#include "job/cluster_wire.hpp"

#include <atomic>
#include <chrono>
#include <cstring>

#include <k3/cluster.hpp>
#include <k3/error.hpp>

#include "maths/pass.hpp"

namespace k3::cluster {
namespace {

constexpr std::uint32_t kSliceMs = 200;  // a wait polls the stop flag this often
constexpr std::uint64_t kMaxPayload = std::uint64_t{1} << 31;

std::string peer(int r) { return "rank " + std::to_string(r); }

}  // namespace

bool Wire::stopped() {
  if (stop_ == nullptr || !stop_->load()) return false;
  const auto now = std::chrono::steady_clock::now();
  if (!stop_seen_) stop_seen_ = now;
  return std::chrono::duration<double>(now - *stop_seen_).count() >= grace_s_;
}

void Wire::send(int dest, Header h, std::span<const std::span<const std::byte>> parts) {
  std::uint64_t total = 0;
  for (const auto& p : parts) total += p.size();
  h.magic = kMagic;
  h.payload_bytes = total;
  auto push = [&](std::span<const std::byte> bytes) {
    for (;;) {
      const sdk::Status st = t_.send(dest, bytes, kSliceMs);
      if (st.ok()) break;
      if (st.code == sdk::StatusCode::timed_out && !stopped()) continue;
      if (st.code == sdk::StatusCode::interrupted || stopped())
        throw Error(ExitCode::interrupted, "stopped while sending to " + peer(dest));
      throw RuntimeError("sending to " + peer(dest) + " failed: " + st.detail);
    }
    sent_ += bytes.size();
  };
  push(std::as_bytes(std::span<const Header>(&h, 1)));
  if (total == 0) return;
  if (parts.size() == 1) {
    push(parts[0]);
    return;
  }
  std::vector<std::byte> joined;
  joined.reserve(total);
  for (const auto& p : parts) joined.insert(joined.end(), p.begin(), p.end());
  push(joined);
}

void Wire::send_text(int dest, Kind kind, int code, const std::string& text) {
  Header h;
  h.kind = kind;
  h.code = code;
  const std::span<const std::byte> part = std::as_bytes(std::span<const char>(text.data(), text.size()));
  send(dest, h, std::span<const std::span<const std::byte>>(&part, 1));
}

void Wire::post_bytes(int dest, std::vector<std::byte> bytes) {
  Posted& p = posted_.emplace_back();
  p.bytes = std::move(bytes);
  if (const sdk::Status st = t_.post(dest, p.bytes, p.ticket); !st.ok()) {
    posted_.pop_back();
    throw RuntimeError("sending to " + peer(dest) + " failed: " + st.detail);
  }
  sent_ += p.bytes.size();
}

void Wire::post(int dest, Header h, std::span<const std::span<const std::byte>> parts) {
  std::uint64_t total = 0;
  for (const auto& p : parts) total += p.size();
  h.magic = kMagic;
  h.payload_bytes = total;
  const auto* head = reinterpret_cast<const std::byte*>(&h);
  post_bytes(dest, std::vector<std::byte>(head, head + sizeof(Header)));
  if (total == 0) return;
  std::vector<std::byte> joined;
  joined.reserve(total);
  for (const auto& p : parts) joined.insert(joined.end(), p.begin(), p.end());
  post_bytes(dest, std::move(joined));
}

void Wire::post_text(int dest, Kind kind, int code, const std::string& text) {
  Header h;
  h.kind = kind;
  h.code = code;
  const std::span<const std::byte> part = std::as_bytes(std::span<const char>(text.data(), text.size()));
  post(dest, h, std::span<const std::span<const std::byte>>(&part, 1));
}

void Wire::progress() {
  for (auto it = posted_.begin(); it != posted_.end();) {
    bool done = false;
    if (const sdk::Status st = t_.sent(it->ticket, done); !st.ok())
      throw RuntimeError("a message posted to a peer failed: " + st.detail);
    it = done ? posted_.erase(it) : it + 1;
  }
}

bool Wire::receive_until(int src, double seconds, Message& out) {
  const auto start = std::chrono::steady_clock::now();
  auto take = [&](std::span<std::byte> into) {
    for (;;) {
      const sdk::Status st = t_.recv(src, into, kSliceMs);
      if (st.ok()) return true;
      if (stopped()) throw Error(ExitCode::interrupted, "stopped while waiting for " + peer(src));
      if (st.code == sdk::StatusCode::interrupted)
        throw Error(ExitCode::interrupted, "stopped while waiting for " + peer(src));
      if (st.code != sdk::StatusCode::timed_out)
        throw RuntimeError("receiving from " + peer(src) + " failed: " + st.detail);
      progress();  // what this rank posted goes while it waits
      if (seconds > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= seconds)
        return false;
    }
  };
  if (!take(std::as_writable_bytes(std::span<Header>(&out.header, 1)))) return false;
  if (out.header.magic != kMagic)
    throw RuntimeError("a message from " + peer(src) + " that is not k3host's (another build or byte order?)");
  if (out.header.payload_bytes > kMaxPayload)
    throw RuntimeError("a message from " + peer(src) + " of " + std::to_string(out.header.payload_bytes) + " bytes");
  out.payload.resize(out.header.payload_bytes);
  if (!out.payload.empty()) {
    // The payload follows its header at once: no deadline of its own but the run's.
    while (!take(out.payload)) {
    }
  }
  return true;
}

Message Wire::receive(int src) {
  Message m;
  if (!receive_until(src, timeout_s_, m))
    throw RuntimeError("no message from " + peer(src) + " in " + std::to_string(static_cast<long>(timeout_s_)) +
                       " s (cluster.timeout_s)");
  return m;
}

bool Wire::receive_within(int src, double seconds, Message& out) { return receive_until(src, seconds, out); }

}  // namespace k3::cluster

namespace k3 {

std::uint64_t cluster_pass_bytes(const ModelConfig& config, std::size_t layer, std::uint64_t rows) {
  const auto layers = static_cast<std::size_t>(config.num_hidden_layers);
  if (layer >= layers) return sizeof(cluster::Header) + rows * sizeof(std::uint32_t);
  const auto E = static_cast<std::uint64_t>(config.hidden_size);
  return sizeof(cluster::Header) + sizeof(cluster::WireSlice) + rows * 4 +
         (1 + maths::banked_before(config, layer)) * rows * E * sizeof(float);
}

}  // namespace k3
