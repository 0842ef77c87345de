// The messages between the ranks of a model split over ranks (docs/cluster.md, "What
// crosses the network"). Each is a fixed 48-byte header, then, when payload_bytes is not 0,
// the payload as a second transport message. Ranks of one job run the same build on the
// same architecture; the magic catches anything else.
//
//   hello   rank 0 → 1 → … → last → 0 once every rank has loaded its layers
//   pass    rank r → r+1: slices [slices × WireSlice], tokens [rows × u32], then the
//           activations after rank r's layers (f32 prefix [rows, E], banked × [rows, E])
//   result  last → 0: the picks [rows × u32] (the last rank samples), then the logits rows
//           rank 0 asked for (f32), as BatchForward::run gives them
//   error   from the rank that failed, on round the ring to rank 0: exit code and "rank N: why"
//   stop    rank 0 → 1 → … → last → 0: every rank ends with `code`
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <k3/transport.hpp>

namespace k3::cluster {

inline constexpr std::uint32_t kMagic = 0x4c43334bu;  // "K3CL"

enum class Kind : std::uint32_t { hello = 1, pass = 2, result = 3, error = 4, stop = 5 };

struct Header {
  std::uint32_t magic = kMagic;
  Kind kind = Kind::hello;
  std::uint64_t seq = 0;     ///< the pass's number (rank 0 counts them)
  std::uint32_t slices = 0;  ///< pass: sequences in it
  std::uint32_t rows = 0;    ///< pass: tokens in it; result: picks in it
  std::uint32_t banked = 0;  ///< pass: AttnRes snapshots among the activations
  std::int32_t code = 0;     ///< error, stop: the exit code
  std::uint64_t payload_bytes = 0;
  std::uint64_t reserved = 0;
};
static_assert(sizeof(Header) == 48);

/// One sequence's part of a pass (k3::LinkedSlice on the wire), with the settings the
/// last rank picks by.
struct WireSlice {
  std::uint64_t sequence = 0;
  std::int64_t position = 0;
  std::uint32_t rows = 0;
  std::uint8_t all_positions = 0;
  std::uint8_t tentative = 0;
  std::uint8_t logits = 0;  ///< its answered rows' logits go back to rank 0
  std::uint8_t pick = 0;    ///< the last rank picks after each answered row
  double temperature = 0, top_p = 1, min_p = 0, repeat_penalty = 1;
  std::int64_t top_k = 0, repeat_last_n = 0;
  std::uint64_t seed = 0;
};
static_assert(sizeof(WireSlice) == 80);

/// A received message.
struct Message {
  Header header;
  std::vector<std::byte> payload;
  [[nodiscard]] std::string text() const { return {reinterpret_cast<const char*>(payload.data()), payload.size()}; }
};

/// The transport, with what every rank needs around it: the deadline of a wait, the stop
/// flag, and the bytes sent.
class Wire {
 public:
  /// `timeout_s` 0: wait without limit; `stop` (may be null): a set flag ends a wait.
  Wire(sdk::Transport& transport, double timeout_s, const std::atomic<bool>* stop)
      : t_(transport), timeout_s_(timeout_s), stop_(stop) {}

  /// Sends the header and, when there is one, the payload (`parts` in order, as one
  /// message). RuntimeError naming the peer when the transport fails.
  void send(int dest, Header h, std::span<const std::span<const std::byte>> parts);
  void send_text(int dest, Kind kind, int code, const std::string& text);
  /// As send(), but returns at once (Transport::post): the header and the payload are
  /// copied and go while this rank does other work; the waits of receive() and progress()
  /// let them. Rank 0 sends so: it never blocks on a send while the last rank waits to hand
  /// it a result.
  void post(int dest, Header h, std::span<const std::span<const std::byte>> parts);
  void post_text(int dest, Kind kind, int code, const std::string& text);
  /// Forgets the posted messages that have gone. RuntimeError when the transport fails.
  void progress();
  /// Posted messages not yet gone.
  [[nodiscard]] std::size_t posted() const noexcept { return posted_.size(); }
  /// The next message from `src`. RuntimeError when the transport fails or the deadline
  /// passes; k3::Error(interrupted) when the stop flag is set.
  Message receive(int src);
  /// The same with a deadline of `seconds` of its own; false when nothing came.
  bool receive_within(int src, double seconds, Message& out);

  /// A set `stop` ends a wait `grace_s` seconds after this wire first saw it: 0 at once
  /// (rank 0, which ends the run itself), a few seconds on a later rank, whose signal comes
  /// with rank 0's (mpirun hands every rank the same one) and which waits for rank 0's
  /// word, so that every rank ends with the code rank 0 chose.
  void set_stop(const std::atomic<bool>* stop, double grace_s = 0) noexcept {
    stop_ = stop;
    grace_s_ = grace_s;
    stop_seen_.reset();
  }
  [[nodiscard]] std::uint64_t bytes_sent() const noexcept { return sent_; }
  [[nodiscard]] sdk::Transport& transport() noexcept { return t_; }

 private:
  bool receive_until(int src, double seconds, Message& out);
  /// The stop flag is set and its grace has passed.
  bool stopped();
  void post_bytes(int dest, std::vector<std::byte> bytes);
  /// A message posted: its bytes stay here until the transport says they have gone.
  struct Posted {
    std::vector<std::byte> bytes;
    std::uint64_t ticket = 0;
  };
  sdk::Transport& t_;
  std::deque<Posted> posted_;
  double timeout_s_;
  const std::atomic<bool>* stop_;
  double grace_s_ = 0;
  std::optional<std::chrono::steady_clock::time_point> stop_seen_;
  std::uint64_t sent_ = 0;
};

}  // namespace k3::cluster
