// model.safetensors.index.json, through CheckpointIndex::open on a checkpoint of two small
// valid shards (made here with the writer's own encode_safetensors_header). The first input
// byte picks the storage: odd = one that cannot list (http), where the index names the
// shards; even = one that lists, where the index must agree with them. The rest is the
// index. Oracle: an index accepted lists every tensor of the shards it names, findable by name.
#include "fuzz_support.hpp"
#include "mem_storage.hpp"
#include "synth/safetensors_write.hpp"

namespace {

const char* const kRoot = "mem://model";

std::string shard(const std::vector<k3::TensorSpec>& specs) {
  std::vector<const k3::TensorSpec*> ptrs;
  std::uint64_t bytes = 0;
  for (const auto& s : specs) {
    ptrs.push_back(&s);
    bytes += s.nbytes();
  }
  return k3::detail::encode_safetensors_header(ptrs) + std::string(bytes, '\0');
}

k3::TensorSpec spec(std::string name, k3::DType dtype, std::vector<std::uint64_t> shape) {
  k3::TensorSpec s;
  s.name = std::move(name);
  s.dtype = dtype;
  s.shape = std::move(shape);
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static const std::string shard1 = shard(
      {spec("model.embed_tokens.weight", k3::DType::bf16, {4, 2}), spec("model.norm.weight", k3::DType::f32, {2})});
  static const std::string shard2 = shard({spec("lm_head.weight", k3::DType::bf16, {4, 2})});
  k3::fuzz::MemStorage storage(/*can_list=*/(data[0] & 1) == 0);
  storage.put(std::string(kRoot) + "/model-00001-of-00002.safetensors", shard1);
  storage.put(std::string(kRoot) + "/model-00002-of-00002.safetensors", shard2);
  storage.put(std::string(kRoot) + "/model.safetensors.index.json", std::string(k3::fuzz::as_text(data + 1, size - 1)));
  k3::fuzz::guarded([&] {
    const auto index = k3::CheckpointIndex::open(storage, kRoot);
    for (const auto& t : index.tensors()) {
      const k3::TensorInfo* found = index.find(t.name);
      k3::fuzz::check(found != nullptr && found->name == t.name, t.name + ": accepted but not found by name");
      k3::fuzz::check(t.file < index.files().size(), t.name + ": file index out of range");
    }
  });
  return 0;
}
