// The packed trunk (trunk.json against trunk.bin), uncoded and coded (pack-trunk --codec),
// through PackedTrunk::open, the decoding of every coded run (whatever its xxh64) and
// verify_hashes, read through a storage backend as the streaming loader does, with the
// checkpoint identity kIdentity expected (make_corpus.py writes it into the seeds).
//
// Input: 4 bytes little-endian, the size of trunk.bin (taken modulo 16 MiB), then trunk.json,
// then optionally a NUL byte and trunk.bin's first bytes (the rest of it reads as zeros; with
// no NUL all of it does). Oracle: every run accepted lies inside trunk.bin at a 4096-aligned
// offset, no two overlap, every tensor lies inside its run with dtype × shape == its bytes,
// and a coded run's tensor streams lie inside its coded bytes, back to back, each
// decoding to at most twice its bytes (so decoding is bounded by trunk.bin); damage is an
// error, never a crash.
#include <algorithm>
#include <memory>

#include <k3/geometry.hpp>
#include <k3/packed_trunk.hpp>

#include "fuzz_support.hpp"
#include "io/pack_trunk_format.hpp"
#include "mem_storage.hpp"

namespace {
constexpr std::uint64_t kIdentity = 0x6b33686f73743130ull;  // "k3host10": the seeds' checkpoint_identity
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  const std::uint64_t bin_bytes = (std::uint64_t{data[0]} | std::uint64_t{data[1]} << 8 | std::uint64_t{data[2]} << 16 |
                                   std::uint64_t{data[3]} << 24) %
                                  (std::uint64_t{16} << 20);
  const std::string_view rest = k3::fuzz::as_text(data + 4, size - 4);
  const std::size_t nul = rest.find('\0');
  k3::fuzz::MemStorage storage;
  storage.put("mem://trunk/trunk.json", std::string(rest.substr(0, nul)));
  if (nul == std::string_view::npos) {
    storage.put_zeros("mem://trunk/trunk.bin", bin_bytes);
  } else {
    std::string bin(rest.substr(nul + 1, static_cast<std::size_t>(bin_bytes)));
    bin.resize(static_cast<std::size_t>(bin_bytes), '\0');
    storage.put("mem://trunk/trunk.bin", std::move(bin));
  }
  k3::fuzz::guarded([&] {
    const k3::PackedTrunk t = k3::PackedTrunk::open(storage, "mem://trunk", kIdentity);
    std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
    for (const auto* runs : {&t.layers(), &t.globals()})
      for (const auto& r : *runs) {
        k3::fuzz::check(r.file_offset % k3::kTrunkAlign == 0, r.name + ": unaligned");
        k3::fuzz::check(r.file_offset <= bin_bytes && r.stored_bytes() <= bin_bytes - r.file_offset,
                        r.name + ": outside trunk.bin");
        k3::fuzz::check(!r.coded() || t.codec() != "none", r.name + ": coded in a trunk without a codec");
        spans.emplace_back(r.file_offset, r.file_offset + r.stored_bytes());
        std::uint64_t coded_end = 0;
        for (const auto& x : r.tensors) {
          std::uint64_t bytes = k3::element_size(x.dtype);
          for (auto d : x.shape) bytes *= d;
          k3::fuzz::check(bytes == x.nbytes, r.name + " " + x.name + ": dtype x shape differs from its bytes");
          k3::fuzz::check(x.offset <= r.nbytes && x.nbytes <= r.nbytes - x.offset,
                          r.name + " " + x.name + ": outside its run");
          if (!r.coded()) continue;
          k3::fuzz::check(x.coded_offset >= coded_end && x.coded_offset - coded_end < k3::kTrunkTensorAlign,
                          r.name + " " + x.name + ": coded streams not back to back");
          k3::fuzz::check(x.coded_offset <= r.coded_bytes && x.coded_bytes <= r.coded_bytes - x.coded_offset,
                          r.name + " " + x.name + ": coded stream outside its run");
          k3::fuzz::check(x.nbytes / 2 <= x.coded_bytes,
                          r.name + " " + x.name + ": decodes to more than twice its stream");
          coded_end = x.coded_offset + x.coded_bytes;
        }
      }
    std::sort(spans.begin(), spans.end());
    for (std::size_t i = 1; i < spans.size(); ++i)
      k3::fuzz::check(spans[i].first >= spans[i - 1].second, "runs overlap");
    // Decode every coded run whatever its xxh64 says, so that damaged streams reach the decoder.
    std::unique_ptr<k3::sdk::StorageFile> bin;
    k3::fuzz::check(storage.open(t.bin_uri(), bin).ok(), "trunk.bin does not open");
    for (const auto& r : t.layers())
      for (const auto& x : r.tensors)
        if (r.coded()) (void)k3::io::trunk_format::decoded_tensor_hash(*bin, t.bin_uri(), r, x);
    t.verify_hashes(storage);
  });
  return 0;
}
