// Trunk codec benchmark: the ratio (coded bytes / raw bytes) of pack-trunk --codec bf16-zstd
// (or bf16-huff)
// and its decode speed per core, against memcpy of the same bytes measured in the same run.
//   k3bench-trunk-codec --model DIR         the layer tensors of a checkpoint (as pack-trunk codes them)
//   k3bench-trunk-codec --gaussian [MIB]    Gaussian BF16 with the K3 geometry's layer shapes:
//                                           each distinct tensor shape sampled (at most MIB MiB,
//                                           default 16), weighted by its bytes over all 61 layers
// Options: --huffman (codec bf16-huff: the exponent bytes Huffman-coded instead of zstd),
// --level N (zstd level, default 1), --min-match N (zstd, default 7; 0: the level's),
// --block KIB (default 256), --repeats N (5).
// Decoding runs on one thread: GB/s of decoded output per second of that thread's CPU time
// (per core, less disturbed by a busy machine than wall time, also printed), best of the
// repeats; memcpy of the same bytes is timed the same way in the same run. The line "keeps
// up with a disk of" is decode GB/s × ratio: the coded read rate one core sustains.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <k3/checkpoint.hpp>
#include <k3/error.hpp>
#include <k3/geometry.hpp>
#include <k3/model_config.hpp>
#include <k3/plugin_host.hpp>

#include "io/pack_trunk_codec.hpp"
#include "model/tensor_table.hpp"

namespace {

namespace codec = k3::io::trunk_codec;
using Clock = std::chrono::steady_clock;

/// This thread's CPU time in seconds.
double cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

struct Sample {
  std::string name;
  k3::DType dtype{};
  std::vector<std::byte> raw;
  std::vector<std::byte> stream;
  double weight = 1;  ///< the real bytes this sample stands for / its bytes
};

std::vector<std::byte> gaussian_bf16(std::uint64_t n, double mean, double sigma, std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(static_cast<float>(mean), static_cast<float>(sigma));
  std::vector<std::byte> out(2 * n);
  for (std::uint64_t i = 0; i < n; ++i) {
    const float f = dist(rng);
    std::uint32_t bits = 0;
    std::memcpy(&bits, &f, 4);
    bits += 0x7FFF + ((bits >> 16) & 1);  // round to nearest even
    out[2 * i] = static_cast<std::byte>(bits >> 16);
    out[2 * i + 1] = static_cast<std::byte>(bits >> 24);
  }
  return out;
}

/// The layer tensors of a checkpoint, read through the posix plugin.
std::vector<Sample> from_model(const std::string& dir) {
  k3::PluginHost host;
  auto storage = host.create_storage("posix", {});
  const k3::ModelConfig config = k3::read_model_config(*storage, dir);
  const k3::CheckpointIndex index = k3::CheckpointIndex::open(*storage, dir);
  std::map<std::uint32_t, std::unique_ptr<k3::sdk::StorageFile>> files;
  std::vector<Sample> out;
  for (std::int64_t li = 0; li < config.num_hidden_layers; ++li)
    k3::table::for_each_layer_tensor(config, li, [&](const k3::table::Entry& e, const auto&) {
      const k3::TensorInfo& t = k3::table::require(index, e);
      auto& f = files[t.file];
      if (!f && !storage->open(index.files()[t.file].uri, f).ok()) throw k3::RuntimeError("cannot open a shard");
      Sample s{t.name, t.dtype, std::vector<std::byte>(t.nbytes), {}, 1};
      k3::sdk::ReadRequest r{t.offset, t.nbytes, s.raw.data()};
      if (!f->read({&r, 1}).ok()) throw k3::RuntimeError("reading " + t.name + " failed");
      out.push_back(std::move(s));
    });
  return out;
}

/// Gaussian BF16 in the shapes of the K3 geometry's layers: one sample per distinct
/// (suffix, shape, dtype), at most `cap` bytes, weighted by its bytes over every layer.
std::vector<Sample> gaussian_k3(std::uint64_t cap) {
  const k3::ModelConfig config = k3::load_geometry("k3").config;
  struct Kind {
    k3::DType dtype;
    std::vector<std::uint64_t> shape;
    double total = 0;
  };
  std::map<std::string, Kind> kinds;
  for (std::int64_t li = 0; li < config.num_hidden_layers; ++li)
    k3::table::for_each_layer_tensor(config, li, [&](const k3::table::Entry& e, const auto&) {
      std::uint64_t n = 1;
      for (auto d : e.shape) n *= d;
      const std::string suffix = e.name.substr(e.name.find('.', e.name.find("layers.") + 7) + 1);
      std::string key = suffix + " " + k3::to_string(e.release);
      for (auto d : e.shape) key += " " + std::to_string(d);
      Kind& k = kinds[key];
      k.dtype = e.release;
      k.shape = e.shape;
      k.total += static_cast<double>(n * k3::element_size(e.release));
    });
  std::vector<Sample> out;
  std::uint32_t seed = 1;
  for (const auto& [key, k] : kinds) {
    const std::uint64_t cols = k.shape.empty() ? 1 : k.shape.back();
    const auto real = static_cast<std::uint64_t>(k.total);
    const std::uint64_t bytes = std::min<std::uint64_t>(real, cap) / 4 * 4;
    Sample s{key, k.dtype, {}, {}, static_cast<double>(real) / static_cast<double>(std::max<std::uint64_t>(bytes, 1))};
    const bool vector = k.shape.size() < 2;  // norms and the like: around 1
    if (k.dtype == k3::DType::bf16)
      s.raw = gaussian_bf16(bytes / 2, vector ? 1.0 : 0.0, vector ? 0.1 : 1.0 / std::sqrt(static_cast<double>(cols)),
                            seed++);
    else
      s.raw = std::vector<std::byte>(bytes);  // F32 is stored as it is: its content does not matter here
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model;
  bool gaussian = false;
  std::uint64_t cap_mib = 16;
  codec::EncodeOptions options;
  int repeats = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc && argv[i + 1][0] != '-';
    if (a == "--model" && i + 1 < argc) {
      model = argv[++i];
    } else if (a == "--gaussian") {
      gaussian = true;
      if (has_value) cap_mib = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--level" && i + 1 < argc) {
      options.level = std::atoi(argv[++i]);
    } else if (a == "--huffman") {
      options.huffman = true;
    } else if (a == "--min-match" && i + 1 < argc) {
      options.min_match = std::atoi(argv[++i]);
    } else if (a == "--block" && i + 1 < argc) {
      options.block_raw = static_cast<std::uint32_t>(std::strtoul(argv[++i], nullptr, 10) << 10);
    } else if (a == "--repeats" && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: k3bench-trunk-codec (--model DIR | --gaussian [MIB]) [--huffman] [--level N] [--min-match "
                   "N] [--block KIB] [--repeats N]\n");
      return 2;
    }
  }
  if (model.empty() == !gaussian) {
    std::fprintf(stderr, "k3bench-trunk-codec: give --model DIR or --gaussian\n");
    return 2;
  }
  try {
    std::vector<Sample> samples = gaussian ? gaussian_k3(cap_mib << 20) : from_model(model);
    codec::Encoder encoder(options);
    double raw_w = 0, coded_w = 0, bf16_raw_w = 0, bf16_coded_w = 0;
    std::uint64_t raw_bytes = 0, coded_bytes = 0;
    const auto e0 = Clock::now();
    for (Sample& s : samples) {
      encoder.encode(s.raw, s.dtype, s.stream);
      raw_bytes += s.raw.size();
      coded_bytes += s.stream.size();
      raw_w += s.weight * static_cast<double>(s.raw.size());
      coded_w += s.weight * static_cast<double>(s.stream.size());
      if (s.dtype == k3::DType::bf16) {
        bf16_raw_w += s.weight * static_cast<double>(s.raw.size());
        bf16_coded_w += s.weight * static_cast<double>(s.stream.size());
      }
    }
    const double encode_s = std::chrono::duration<double>(Clock::now() - e0).count();

    // Decode every stream into one output buffer per sample, and memcpy the raw bytes into the
    // same buffers: both best of `repeats`.
    std::vector<std::vector<std::byte>> dst(samples.size());
    for (std::size_t i = 0; i < samples.size(); ++i) dst[i].resize(samples[i].raw.size());
    codec::Decoder decoder;
    double best_decode = 1e30, best_copy = 1e30, best_decode_wall = 1e30;
    for (int r = 0; r < repeats; ++r) {
      const auto w0 = Clock::now();
      double t0 = cpu_seconds();
      for (std::size_t i = 0; i < samples.size(); ++i) {
        codec::MemoryInput in(samples[i].stream);
        (void)decoder.decode(in, dst[i], samples[i].dtype == k3::DType::bf16);
      }
      best_decode = std::min(best_decode, cpu_seconds() - t0);
      best_decode_wall = std::min(best_decode_wall, std::chrono::duration<double>(Clock::now() - w0).count());
      for (std::size_t i = 0; i < samples.size(); ++i)
        if (dst[i] != samples[i].raw) throw k3::RuntimeError(samples[i].name + ": decoded bytes differ");
      t0 = cpu_seconds();
      for (std::size_t i = 0; i < samples.size(); ++i) std::memcpy(dst[i].data(), samples[i].raw.data(), dst[i].size());
      best_copy = std::min(best_copy, cpu_seconds() - t0);
    }
    const double gb = static_cast<double>(raw_bytes) / 1e9;
    const double ratio = coded_w / raw_w;
    std::printf("input: %s, %zu tensors, %.1f MB sampled%s\n",
                gaussian ? "Gaussian BF16, K3 layer shapes" : model.c_str(), samples.size(),
                static_cast<double>(raw_bytes) / 1e6,
                gaussian ? (", standing for " + std::to_string(static_cast<long long>(raw_w / 1e9)) + " GB").c_str()
                         : "");
    if (options.huffman)
      std::printf("codec bf16-huff: blocks of %u KiB\n", options.block_raw >> 10);
    else
      std::printf("codec bf16-zstd: level %d, min match %d, blocks of %u KiB\n", options.level, options.min_match,
                  options.block_raw >> 10);
    std::printf("ratio (coded / raw), layer tensors:  %.4f\n", ratio);
    std::printf("ratio, BF16 tensors only:             %.4f\n", bf16_raw_w > 0 ? bf16_coded_w / bf16_raw_w : 1.0);
    std::printf("encode: %.3f GB/s (one core)\n", gb / encode_s);
    std::printf("decode: %.3f GB/s of output per core (best of %d; %.3f GB/s by wall time)\n", gb / best_decode,
                repeats, gb / best_decode_wall);
    std::printf("memcpy: %.3f GB/s (same bytes, same run); decode / memcpy = %.3f\n", gb / best_copy,
                best_copy / best_decode);
    std::printf("one core keeps up with a disk of %.3f GB/s (decode x ratio; here ~1.29 GB/s = 1.2 GiB/s)\n",
                gb / best_decode * ratio);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "k3bench-trunk-codec: %s\n", e.what());
    return 1;
  }
}
