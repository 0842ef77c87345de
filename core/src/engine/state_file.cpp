// State files: a conversation's carried state written and read back (the layout is in
// engine/session_impl.hpp), refused unless it was saved by a run of this very checkpoint.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include <xxhash.h>

#include <k3/checkpoint.hpp>
#include <k3/error.hpp>
#include <k3/user_files.hpp>

#include "engine/session_impl.hpp"
#include "maths/forward.hpp"
#include "util/atomic_file.hpp"

namespace k3::engine {
namespace {

constexpr char kMagic[8] = {'K', '3', 'S', 'T', 'A', 'T', 'E', '\0'};
constexpr std::size_t kHeader = 48;
constexpr std::uint32_t kUnsound = 1;  ///< header flags bit 0

class Writer {
 public:
  template <class T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const char*>(&v);
    buf_.insert(buf_.end(), p, p + sizeof v);
  }
  template <class T>
  void put_array(std::span<const T> v) {
    const auto* p = reinterpret_cast<const char*>(v.data());
    buf_.insert(buf_.end(), p, p + v.size() * sizeof(T));
  }
  template <class T>
  void put_array(const std::vector<T>& v) {
    const auto* p = reinterpret_cast<const char*>(v.data());
    buf_.insert(buf_.end(), p, p + v.size() * sizeof(T));
  }
  std::vector<char>& bytes() { return buf_; }

 private:
  std::vector<char> buf_;
};

class Reader {
 public:
  Reader(const char* p, std::size_t n, std::string file) : p_(p), n_(n), file_(std::move(file)) {}
  template <class T>
  T get() {
    T v;
    need(sizeof v);
    std::memcpy(&v, p_ + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  template <class T>
  void get_array(std::vector<T>& v, std::uint64_t n) {
    if (n > (n_ - at_) / sizeof(T)) ends_early();  // before n * sizeof(T), which may overflow
    v.resize(n);
    if (n != 0) std::memcpy(v.data(), p_ + at_, n * sizeof(T));  // an empty vector's data() may be null
    at_ += n * sizeof(T);
  }
  [[nodiscard]] bool done() const { return at_ == n_; }

 private:
  void need(std::size_t k) const {
    if (k > n_ - at_) ends_early();
  }
  [[noreturn]] void ends_early() const {
    throw UsageError(file_ + ": state payload ends early (corrupt or from another model)");
  }
  const char* p_;
  std::size_t n_;
  std::size_t at_ = 0;
  std::string file_;
};

}  // namespace

void save_state(const std::filesystem::path& file, const ModelConfig& c, std::uint64_t identity,
                const maths::SequenceState& st, std::span<const std::uint32_t> pending, std::string_view unsound) {
  Writer w;
  w.put(st.position);
  w.put(static_cast<std::uint64_t>(st.tokens.size()));
  w.put_array(st.tokens);
  w.put(static_cast<std::uint64_t>(pending.size()));
  w.put_array(pending);
  for (std::size_t i = 0; i < static_cast<std::size_t>(c.num_hidden_layers); ++i) {
    if (c.is_mla(static_cast<std::int64_t>(i))) {
      w.put(static_cast<std::uint64_t>(st.mla[i].latent.size()));
      w.put_array(st.mla[i].latent);
    } else {
      w.put_array(st.kda[i].S);
      w.put_array(st.kda[i].conv_q);
      w.put_array(st.kda[i].conv_k);
      w.put_array(st.kda[i].conv_v);
    }
  }
  unsound = unsound.substr(0, kMaxUnsoundReasonBytes);  // a reason is one line; the cap keeps load_state's bound
  if (!unsound.empty()) {
    w.put(static_cast<std::uint32_t>(unsound.size()));
    w.bytes().insert(w.bytes().end(), unsound.begin(), unsound.end());
  }
  const std::vector<char>& payload = w.bytes();
  std::vector<char> out(kHeader);
  std::memcpy(out.data(), kMagic, 8);
  const std::uint32_t version = kStateVersion, flags = unsound.empty() ? 0 : kUnsound;
  const std::uint64_t fp = c.fingerprint(), size = payload.size();
  const std::uint64_t sum = XXH64(payload.data(), payload.size(), 0);
  std::memcpy(out.data() + 8, &version, 4);
  std::memcpy(out.data() + 12, &flags, 4);
  std::memcpy(out.data() + 16, &fp, 8);
  std::memcpy(out.data() + 24, &identity, 8);
  std::memcpy(out.data() + 32, &size, 8);
  std::memcpy(out.data() + 40, &sum, 8);
  out.insert(out.end(), payload.begin(), payload.end());
  write_file_atomically(file, out.data(), out.size());
}

std::uint64_t max_state_bytes(const ModelConfig& c, std::int64_t max_positions) {
  // The largest file save_state writes for a conversation of max_positions ids (fed and
  // pending together), plus room for an unsound reason: a larger one is refused unread.
  const auto n = static_cast<std::uint64_t>(std::max<std::int64_t>(max_positions, 0));
  const maths::SequenceState one = maths::make_state(c, 1);
  std::uint64_t bytes = kHeader + 3 * 8 + 4 * n + 4 + kMaxUnsoundReasonBytes;
  for (std::size_t i = 0; i < static_cast<std::size_t>(c.num_hidden_layers); ++i) {
    if (c.is_mla(static_cast<std::int64_t>(i)))
      bytes += 8 + 4 * n * static_cast<std::uint64_t>(c.kv_lora_rank + c.qk_rope_head_dim);
    else
      bytes += 4 *
               (one.kda[i].S.size() + one.kda[i].conv_q.size() + one.kda[i].conv_k.size() + one.kda[i].conv_v.size());
  }
  return bytes;
}

SavedState load_state(const std::filesystem::path& file, const ModelConfig& c, std::int64_t max_positions,
                      std::uint64_t identity, std::string_view model) {
  const std::string name = file.string();
  // A regular file no larger than this model's state at this context, checked unread.
  const std::string bytes = read_user_file(file, "", "state file", max_state_bytes(c, max_positions));
  if (bytes.size() < kHeader || std::memcmp(bytes.data(), kMagic, 8) != 0)
    throw UsageError(name + ": not a k3host state file (bad magic)");
  std::uint32_t version, flags;
  std::uint64_t fp, saved_identity, size, sum;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&flags, bytes.data() + 12, 4);
  std::memcpy(&fp, bytes.data() + 16, 8);
  std::memcpy(&saved_identity, bytes.data() + 24, 8);
  std::memcpy(&size, bytes.data() + 32, 8);
  std::memcpy(&sum, bytes.data() + 40, 8);
  if (version == 1)
    throw UsageError(name + ": state format version 1, this k3host reads version " + std::to_string(kStateVersion) +
                     " only: a version 1 file lacks the last generated token, so the conversation cannot be "
                     "continued exactly; run it again and save it with this k3host");
  if (version == 2)
    throw UsageError(name + ": state format version 2, this k3host reads version " + std::to_string(kStateVersion) +
                     " only: a version 2 file records the architecture but not the checkpoint it was computed with, "
                     "so continuing it with these weights cannot be shown to be exact; run it again and save it "
                     "with this k3host");
  if (version != kStateVersion)
    throw UsageError(name + ": state format version " + std::to_string(version) + ", this k3host reads version " +
                     std::to_string(kStateVersion) + " (written by another k3host?)");
  if ((flags & ~kUnsound) != 0)
    throw UsageError(name + ": unknown flags " + std::to_string(flags) + " in the header (written by another k3host?)");
  if (fp != c.fingerprint()) throw UsageError(name + ": the state was saved with a different model architecture");
  // The same architecture is not the same weights: a state is what one checkpoint computed.
  if (saved_identity != identity)
    throw UsageError(name + ": saved by a run of checkpoint identity " + identity_hex(saved_identity) +
                     ", but this run's checkpoint" + (model.empty() ? std::string() : " " + std::string(model)) +
                     " has identity " + identity_hex(identity) +
                     ": a state is what one checkpoint's weights computed, so another checkpoint (a fine-tune, a "
                     "new revision) cannot continue it");
  if (size != bytes.size() - kHeader)
    throw UsageError(name + ": payload is " + std::to_string(bytes.size() - kHeader) + " bytes, header says " +
                     std::to_string(size) + " (truncated?)");
  if (XXH64(bytes.data() + kHeader, size, 0) != sum) throw UsageError(name + ": payload checksum mismatch (corrupt)");

  Reader r(bytes.data() + kHeader, size, name);
  SavedState saved{maths::make_state(c, 1), {}, {}};
  maths::SequenceState& st = saved.state;
  st.position = r.get<std::int64_t>();
  const auto n = r.get<std::uint64_t>();
  if (st.position < 0 || n != static_cast<std::uint64_t>(st.position))
    throw UsageError(name + ": token count does not match position");
  r.get_array(st.tokens, n);
  r.get_array(saved.pending, r.get<std::uint64_t>());
  const auto vocab = static_cast<std::uint64_t>(c.vocab_size);
  for (const auto* ids : {&st.tokens, &saved.pending})
    for (const std::uint32_t id : *ids)
      if (id >= vocab)
        throw UsageError(name + ": token id " + std::to_string(id) + " is outside the vocabulary of " +
                         std::to_string(vocab) + " ids (corrupt or from another model)");
  for (std::size_t i = 0; i < static_cast<std::size_t>(c.num_hidden_layers); ++i) {
    if (c.is_mla(static_cast<std::int64_t>(i))) {
      const auto k = r.get<std::uint64_t>();
      if (k != n * static_cast<std::uint64_t>(c.kv_lora_rank + c.qk_rope_head_dim))
        throw UsageError(name + ": layer " + std::to_string(i) + " cache size does not match the position");
      r.get_array(st.mla[i].latent, k);
    } else {
      r.get_array(st.kda[i].S, st.kda[i].S.size());
      r.get_array(st.kda[i].conv_q, st.kda[i].conv_q.size());
      r.get_array(st.kda[i].conv_k, st.kda[i].conv_k.size());
      r.get_array(st.kda[i].conv_v, st.kda[i].conv_v.size());
    }
  }
  if ((flags & kUnsound) != 0) {
    std::vector<char> reason;
    const auto reason_bytes = r.get<std::uint32_t>();
    if (reason_bytes > kMaxUnsoundReasonBytes)
      throw UsageError(name + ": an unsound reason of " + std::to_string(reason_bytes) + " bytes (at most " +
                       std::to_string(kMaxUnsoundReasonBytes) + "; corrupt)");
    r.get_array(reason, reason_bytes);
    saved.unsound.assign(reason.begin(), reason.end());
    if (saved.unsound.empty()) saved.unsound = "marked unsound, no reason recorded";
  }
  if (!r.done()) throw UsageError(name + ": trailing bytes after the state payload");
  return saved;
}

}  // namespace k3::engine
