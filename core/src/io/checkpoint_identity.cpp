// The checkpoint identity's parts (see checkpoint_identity.hpp): one digest per shard, and
// their combination with the index json and config.json.
#include "io/checkpoint_identity.hpp"

#include "io/xxh3.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <vector>

#include <k3/checkpoint.hpp>
#include <k3/error.hpp>

namespace k3 {
namespace io {
namespace {

/// XXH3-64, streamed; integers are fed little-endian so the digest is the same on every host.
class Digest {
 public:
  Digest() : state_(XXH3_createState()) {
    if (!state_) throw std::bad_alloc();
    XXH3_64bits_reset(state_.get());
  }
  void bytes(const void* p, std::size_t n) { XXH3_64bits_update(state_.get(), p, n); }
  void text(std::string_view s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }
  void u64(std::uint64_t v) {
    std::array<unsigned char, 8> le{};
    for (std::size_t i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(v >> (8 * i));
    bytes(le.data(), le.size());
  }
  [[nodiscard]] std::uint64_t value() const { return XXH3_64bits_digest(state_.get()); }

 private:
  struct Free {
    void operator()(XXH3_state_t* s) const noexcept { XXH3_freeState(s); }
  };
  std::unique_ptr<XXH3_state_t, Free> state_;
};

constexpr std::string_view kShardTag = "k3host shard digest 1";
constexpr std::string_view kContentTag = "k3host checkpoint content 1";
constexpr std::string_view kIdentityTag = "k3host checkpoint identity 1";
constexpr int kReadAttempts = 3;

}  // namespace

ShardDigest shard_digest(sdk::StorageFile& file, const std::string& uri, std::string_view name,
                         std::string_view header_json, std::span<const TensorInfo> tensors) {
  const std::uint64_t size = file.size();
  // The trunk tensors' bytes, in file order, as one run of `total` bytes; the blocks are
  // spread evenly over it (the first at its start, the last at its end), each cut at the
  // end of the tensor it starts in.
  std::vector<const TensorInfo*> trunk;
  for (const TensorInfo& t : tensors)
    if (t.nbytes > 0 && !tensor_names::is_routed_expert(t.name)) trunk.push_back(&t);
  std::sort(trunk.begin(), trunk.end(), [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  std::uint64_t total = 0;
  for (const TensorInfo* t : trunk) total += t->nbytes;
  const std::uint64_t block = std::min(total, kIdentitySampleBytes);
  const std::uint64_t count = total == 0 ? 0 : (total <= kIdentitySampleBytes ? 1 : kIdentitySamples);
  std::vector<sdk::ReadRequest> batch;
  std::vector<std::byte> samples(static_cast<std::size_t>(block * count));
  std::size_t at_tensor = 0;
  std::uint64_t before = 0;  // trunk bytes of the tensors before trunk[at_tensor]
  for (std::uint64_t k = 0; k < count; ++k) {
    const std::uint64_t pos = count == 1 ? 0 : (total - block) / (count - 1) * k;
    while (pos >= before + trunk[at_tensor]->nbytes) before += trunk[at_tensor++]->nbytes;
    const TensorInfo& t = *trunk[at_tensor];
    const std::uint64_t in = pos - before;
    batch.push_back({t.offset + in, std::min(block, t.nbytes - in), samples.data() + k * block, sdk::StatusCode::ok});
  }
  // One batch, its failed requests read again (as every weight read is).
  sdk::Status st = batch.empty() ? sdk::Status{} : file.read(batch);
  for (int attempt = 1; attempt < kReadAttempts && !st.ok(); ++attempt) {
    std::vector<std::size_t> failed;
    std::vector<sdk::ReadRequest> again;
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (batch[i].result != sdk::StatusCode::ok) {
        failed.push_back(i);
        again.push_back({batch[i].offset, batch[i].length, batch[i].dest, sdk::StatusCode::ok});
      }
    if (again.empty()) break;
    st = file.read(again);
    for (std::size_t k = 0; k < failed.size(); ++k) batch[failed[k]].result = again[k].result;
  }
  if (!st.ok()) {
    std::uint64_t at = 0;
    for (const auto& r : batch)
      if (r.result != sdk::StatusCode::ok) {
        at = r.offset;
        break;
      }
    throw RuntimeError(uri + ": cannot read the bytes at offset " + std::to_string(at) +
                       " that the checkpoint identity samples: " + st.detail);
  }
  Digest d;
  d.text(kShardTag);
  d.text(name);
  d.u64(size);
  d.text(header_json);
  d.u64(count);
  for (const auto& r : batch) {
    d.u64(r.offset);
    d.u64(r.length);
    d.bytes(r.dest, static_cast<std::size_t>(r.length));
  }
  std::uint64_t sampled = 0;
  for (const auto& r : batch) sampled += r.length;
  return {d.value(), sampled};
}

std::uint64_t content_digest(std::string_view index_json, std::span<const std::uint64_t> shard_digests) {
  Digest d;
  d.text(kContentTag);
  d.text(index_json);
  d.u64(shard_digests.size());
  for (const std::uint64_t s : shard_digests) d.u64(s);
  return d.value();
}

std::uint64_t identity_of(std::uint64_t config_hash, std::uint64_t content_digest) {
  Digest d;
  d.text(kIdentityTag);
  d.u64(config_hash);
  d.u64(content_digest);
  return d.value();
}

}  // namespace io

std::string identity_hex(std::uint64_t identity) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(identity));
  return buf;
}

}  // namespace k3
