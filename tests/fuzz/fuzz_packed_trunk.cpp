// The packed trunk (trunk.json against trunk.bin), through PackedTrunk::open and
// verify_hashes, read through a storage backend as the streaming loader does, with the tiny
// geometry's config fingerprint expected.
//
// Input: 4 bytes little-endian, the size of trunk.bin (taken modulo 16 MiB; its bytes read
// as zeros), then trunk.json. Oracle: every run accepted lies inside trunk.bin at a
// 4096-aligned offset, no two overlap, and every tensor lies inside its run with
// dtype × shape == its bytes.
#include <algorithm>

#include <k3/geometry.hpp>
#include <k3/pack_trunk.hpp>

#include "fuzz_support.hpp"
#include "mem_storage.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  static const std::uint64_t fingerprint = k3::load_geometry("tiny").config.fingerprint();
  const std::uint64_t bin_bytes =
      (std::uint64_t{data[0]} | std::uint64_t{data[1]} << 8 | std::uint64_t{data[2]} << 16 |
       std::uint64_t{data[3]} << 24) % (std::uint64_t{16} << 20);
  k3::fuzz::MemStorage storage;
  storage.put("mem://trunk/trunk.json", std::string(k3::fuzz::as_text(data + 4, size - 4)));
  storage.put_zeros("mem://trunk/trunk.bin", bin_bytes);
  k3::fuzz::guarded([&] {
    const k3::PackedTrunk t = k3::PackedTrunk::open(storage, "mem://trunk", fingerprint);
    std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
    for (const auto* runs : {&t.layers(), &t.globals()})
      for (const auto& r : *runs) {
        k3::fuzz::check(r.file_offset % k3::kTrunkAlign == 0, r.name + ": unaligned");
        k3::fuzz::check(r.file_offset <= bin_bytes && r.nbytes <= bin_bytes - r.file_offset, r.name + ": outside trunk.bin");
        spans.emplace_back(r.file_offset, r.file_offset + r.nbytes);
        for (const auto& x : r.tensors) {
          std::uint64_t bytes = k3::element_size(x.dtype);
          for (auto d : x.shape) bytes *= d;
          k3::fuzz::check(bytes == x.nbytes, r.name + " " + x.name + ": dtype x shape differs from its bytes");
          k3::fuzz::check(x.offset <= r.nbytes && x.nbytes <= r.nbytes - x.offset, r.name + " " + x.name + ": outside its run");
        }
      }
    std::sort(spans.begin(), spans.end());
    for (std::size_t i = 1; i < spans.size(); ++i) k3::fuzz::check(spans[i].first >= spans[i - 1].second, "runs overlap");
    t.verify_hashes(storage);
  });
  return 0;
}
