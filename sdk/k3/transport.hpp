// k3host plugin SDK: transports, how the ranks of a pipeline of processes reach each other
// (docs/cluster.md). \since ABI 5
//
// A run split over machines starts one process per rank (under mpirun, say); rank r holds a
// range of the model's layers and hands the next rank the activations of every pass. The
// transport moves those messages and nothing else: whole messages of bytes, in order
// between two ranks, never interpreted, converted or reduced. What a message means (a pass,
// an error, a stop) is the host's business.
//
// Creating a transport joins the job (MPI_Init); the process leaves it when it exits (an
// MPI cannot be joined again once left). One per process. Thread-safety: one call at a time, from any thread (the host
// serializes).
//
// post() and sent() (ABI 6) let rank 0 keep several passes in flight: a send that returns
// only once the peer took the message would deadlock rank 0 against the last rank when
// each waits to hand the other a message, so rank 0 posts its passes and never blocks on one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include <k3/status.hpp>

namespace k3::sdk {

class __attribute__((visibility("default"))) Transport {
 public:
  virtual ~Transport() = default;
  /// This process's rank, 0 ≤ rank() < size().
  [[nodiscard]] virtual int rank() const noexcept = 0;
  /// The ranks of the job (1 when started alone).
  [[nodiscard]] virtual int size() const noexcept = 0;
  /// Sends `bytes` to rank `dest` as one message; returns once the buffer may be reused.
  /// timed_out when the peer has not taken it within `timeout_ms` (the message is
  /// withdrawn); interrupted when HostServices::stop_requested() became true meanwhile.
  virtual Status send(int dest, std::span<const std::byte> bytes, std::uint32_t timeout_ms) noexcept = 0;
  /// Starts sending `bytes` to rank `dest` as one message and returns at once, with
  /// `ticket` naming it for sent(). `bytes` must stay valid and unchanged until sent() says
  /// the message has gone. Messages to one peer arrive in the order their send() or post()
  /// began. \since ABI 6
  virtual Status post(int dest, std::span<const std::byte> bytes, std::uint64_t& ticket) noexcept = 0;
  /// Whether the message `ticket` names has gone (`done`; its buffer may then be reused and
  /// the ticket is spent). Never waits, though it may let the transport make progress.
  /// invalid_argument for a ticket post() did not give or that is spent. \since ABI 6
  virtual Status sent(std::uint64_t ticket, bool& done) noexcept = 0;
  /// Receives the next message from rank `src` into `bytes`, which must be exactly its
  /// length (a message of another length is invalid_argument and stays unread). timed_out
  /// when none arrived within `timeout_ms` (nothing consumed: call again); interrupted when
  /// HostServices::stop_requested() became true meanwhile. Waiting must not spin a core:
  /// the ranks of a test share a machine.
  virtual Status recv(int src, std::span<std::byte> bytes, std::uint32_t timeout_ms) noexcept = 0;
  /// Ends every rank of the job now with exit code `code` (MPI_Abort), after logging
  /// `reason`. The host's last resort, when a peer can no longer be told by a message.
  virtual void abort(int code, std::string_view reason) noexcept = 0;
};

}  // namespace k3::sdk
