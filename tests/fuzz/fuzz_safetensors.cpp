// safetensors shard header: the input is a whole shard file (u64 length, JSON header, data),
// read through a storage backend by read_safetensors_header exactly as CheckpointIndex::open
// does. Oracle: every tensor it accepts lies inside the file, after the header, with
// dtype × shape == its bytes, and no two overlap.
#include <algorithm>

#include "fuzz_support.hpp"
#include "io/safetensors.hpp"
#include "mem_storage.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  k3::fuzz::MemFile file(std::string(k3::fuzz::as_text(data, size)));
  k3::fuzz::guarded([&] {
    std::vector<char> buffer;
    std::vector<k3::TensorInfo> tensors;
    k3::io::read_safetensors_header(file, "shard.safetensors", 0, buffer, tensors);
    std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
    for (const auto& t : tensors) {
      std::uint64_t bytes = k3::element_size(t.dtype);
      for (auto d : t.shape) bytes *= d;
      k3::fuzz::check(bytes == t.nbytes, t.name + ": dtype x shape differs from its bytes");
      k3::fuzz::check(t.offset >= 8 && t.offset <= size && t.nbytes <= size - t.offset, t.name + ": outside the file");
      if (t.nbytes) spans.emplace_back(t.offset, t.offset + t.nbytes);
    }
    std::sort(spans.begin(), spans.end());
    for (std::size_t i = 1; i < spans.size(); ++i) k3::fuzz::check(spans[i].first >= spans[i - 1].second, "overlap");
  });
  return 0;
}
