// State files (`job.load_state`), through load_state with the tiny geometry's config and a
// fixed checkpoint identity (kIdentity), then what Session::load does with the result (the
// context check and reserve_state). The state parser needs only the model's config and
// identity, not its weights.
//
// Input: one mode byte, then the file. Mode bit 0 set: before the file is written, the
// harness repairs its header's fingerprint, checkpoint identity, payload size and XXH64
// (bytes 16..48) to match the tiny model, kIdentity and the payload, so that mutations reach
// the payload parser instead of stopping at the checksum. Oracle: a state accepted saves and loads again to the same
// tokens, pending ids and unsound reason.
#include <cstring>

#include <xxhash.h>

#include <k3/geometry.hpp>

#include "engine/session_impl.hpp"
#include "fuzz_support.hpp"
#include "maths/forward.hpp"

namespace {

constexpr std::size_t kHeader = 48;
constexpr std::uint64_t kIdentity = 0x6b33686f73743130ull;  // any value: the harness's "checkpoint"
constexpr std::int64_t kContext = 4096;                     // a context like a small pipeline's memory.context

const k3::ModelConfig& tiny() {
  static const k3::ModelConfig c = k3::load_geometry("tiny").config;
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const k3::ModelConfig& c = tiny();
  std::string file(k3::fuzz::as_text(data + 1, size - 1));
  if ((data[0] & 1) != 0 && file.size() >= kHeader) {
    const std::uint64_t fp = c.fingerprint(), n = file.size() - kHeader;
    const std::uint64_t sum = XXH64(file.data() + kHeader, n, 0);
    std::memcpy(file.data() + 16, &fp, 8);
    std::memcpy(file.data() + 24, &kIdentity, 8);
    std::memcpy(file.data() + 32, &n, 8);
    std::memcpy(file.data() + 40, &sum, 8);
  }
  const auto path = k3::fuzz::scratch().write("state.k3state", file);
  k3::fuzz::guarded([&] {
    k3::engine::SavedState saved = k3::engine::load_state(path, c, kContext, kIdentity);
    const std::int64_t total = saved.state.position + static_cast<std::int64_t>(saved.pending.size());
    if (total > kContext) return;  // Session::load refuses it (a UsageError)
    k3::maths::reserve_state(saved.state, c, kContext);
    const auto again_path = k3::fuzz::scratch().path() / "again.k3state";
    k3::engine::save_state(again_path, c, kIdentity, saved.state, saved.pending, saved.unsound);
    const k3::engine::SavedState again = k3::engine::load_state(again_path, c, kContext, kIdentity);
    k3::fuzz::check(again.state.tokens == saved.state.tokens && again.state.position == saved.state.position,
                    "tokens differ after save and load");
    k3::fuzz::check(again.pending == saved.pending, "pending ids differ after save and load");
    k3::fuzz::check(again.unsound == saved.unsound, "the unsound reason differs after save and load");
  });
  return 0;
}
