// The temporary files this process is writing right now, for a process that must exit at
// once (a second Ctrl-C: core/cli/stop_signal.cpp). Every file k3host writes goes through
// one atomic writer (docs/architecture.md, "Resources"): "<file>.tmp.<pid>", renamed into
// place when complete. While such a writer lives its temporary's name sits in a small
// fixed registry, and remove_live_temporaries() unlinks them all. Targets are never
// touched: what was committed stays, what was not appears nowhere.
#pragma once

namespace k3 {

/// Unlinks the temporary file of every atomic writer of this process that has not
/// committed yet. Async-signal-safe (atomics and unlink() only, no allocation, no lock), so
/// a signal handler may call it right before _exit(); each temporary is unlinked at most
/// once, by whichever caller claims it first. A writer created after the call (another
/// thread) is not covered: call it only when the process is about to end. Writers beyond
/// the registry's capacity (64 at once) are not covered either; their temporaries are
/// what a crash would leave.
void remove_live_temporaries() noexcept;

}  // namespace k3
