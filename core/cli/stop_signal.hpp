// Ctrl-C (SIGINT) and SIGTERM as a stop request. While a StopSignal lives, the first signal
// sets a flag that long work checks at its next boundary (generate(): the next token; chat:
// the end of the answer being written); the work then finishes cleanly. A second signal
// before the flag is cleared exits at once with code 5 (ExitCode::interrupted), after
// unlinking the temporary file of every atomic writer still open
// (k3/temporaries.hpp): files already committed stay, nothing half-written remains.
#pragma once
#include <atomic>

namespace k3::cli {

class StopSignal {
 public:
  StopSignal();   ///< installs the handlers (one StopSignal at a time)
  ~StopSignal();  ///< restores the previous handlers
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  /// The flag to hand to GenerateSettings::stop.
  [[nodiscard]] const std::atomic<bool>& flag() const noexcept;
  [[nodiscard]] bool requested() const noexcept { return flag().load(); }
  /// The signal that set the flag (SIGINT or SIGTERM), 0 when none.
  [[nodiscard]] int signal_number() const noexcept;
  /// Arms again after a handled stop (chat: the next answer can be stopped the same way).
  void clear() noexcept;
};

}  // namespace k3::cli
