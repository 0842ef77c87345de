// Packed layers benchmark: the layers of a partial pack (pack-trunk --layers A-B), packed
// raw and coded from one checkpoint, read as a run's trunk ring reads them, layer by layer,
// through a storage plugin (`direct`, O_DIRECT, so the page cache hides no disk time):
//   disk    the raw run's bytes read plainly in 64 MiB requests, nothing checked: the disk's GB/s
//   raw     the layer through TensorReader from the raw pack: read, every byte checked
//   coded   the layer through TensorReader from the coded pack: read, decoded, every byte checked
//   decode  the coded run's streams, already in memory, decoded on this thread: the codec's
//           GB/s of output per second of this thread's CPU time (per core)
// For each: bytes read, seconds (wall; median of the repeats, the order of disk/raw/coded rotated),
// and for raw/coded the seconds spent checking (TensorReader::verify_ns: the XXH3-64 of every
// byte against trunk.json) and their share of the layer's seconds. Then per layer kind
// (dense, MoE with KDA, MoE with MLA) the mean of the measured layers times the model's count
// of that kind: the whole trunk's bytes and seconds per token, raw against coded.
//
//   k3bench-packed-layers --model DIR --raw PACK --coded PACK [--storage NAME] [--param K=V]...
//                         [--repeats N] [--coded-piece-mib N]
// --storage/--param: the storage plugin and its parameters, as the run that packed and the
// run that reads (e.g. --storage synthetic --param inner=direct for a make-model
// --headers-only checkpoint: trunk.bin passes through `synthetic` unchanged).
// --coded-piece-mib: the coded reads' piece size (default the reader's, 2 MiB).
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <k3/checkpoint.hpp>
#include <k3/error.hpp>
#include <k3/model_config.hpp>
#include <k3/pack_trunk.hpp>
#include <k3/plugin_host.hpp>

#include "io/pack_trunk_codec.hpp"
#include "streaming/layer_loader.hpp"
#include "streaming/tensor_reader.hpp"
#include "util/aligned_buffer.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Args {
  std::string model, raw, coded, storage = "posix";
  k3::PluginParams params;
  int repeats = 3;
  std::uint64_t coded_piece = 0;  ///< 0: the reader's own (TensorReader::kCodedPiece)
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) throw k3::UsageError(k + ": needs a value");
    const std::string v = argv[++i];
    if (k == "--model")
      a.model = v;
    else if (k == "--raw")
      a.raw = v;
    else if (k == "--coded")
      a.coded = v;
    else if (k == "--storage")
      a.storage = v;
    else if (k == "--repeats")
      a.repeats = std::max(1, std::atoi(v.c_str()));
    else if (k == "--coded-piece-mib")
      a.coded_piece = std::strtoull(v.c_str(), nullptr, 10) << 20;
    else if (k == "--param" && v.find('=') != std::string::npos)
      a.params.emplace_back(v.substr(0, v.find('=')), v.substr(v.find('=') + 1));
    else
      throw k3::UsageError("unknown option " + k + " (see the comment at the top of packed_layers_bench.cpp)");
  }
  if (a.model.empty() || a.raw.empty() || a.coded.empty())
    throw k3::UsageError("--model, --raw and --coded are required");
  return a;
}

/// One layer's figures, each a list over the repeats.
struct Timing {
  std::vector<double> disk, raw, raw_verify, coded, coded_verify, coded_cpu, decode_cpu;
  std::uint64_t raw_bytes = 0, coded_bytes = 0, decoded_bytes = 0;
};

/// Reads [offset, offset + n) of `file` plainly into `buf` (4096-aligned) in 64 MiB requests.
void read_plain(k3::sdk::StorageFile& file, std::uint64_t offset, std::uint64_t n, std::byte* buf) {
  constexpr std::uint64_t kPiece = std::uint64_t{64} << 20;
  for (std::uint64_t done = 0; done < n;) {
    const std::uint64_t len = std::min(kPiece, n - done);
    k3::sdk::ReadRequest r{offset + done, len, buf + done};
    if (const k3::sdk::Status st = file.read({&r, 1}); !st.ok()) throw k3::RuntimeError("read: " + st.detail);
    done += len;
  }
}

std::string kind_of(const k3::ModelConfig& c, std::int64_t li) {
  if (c.is_dense(li)) return "dense";
  return c.is_mla(li) ? "MoE, MLA" : "MoE, KDA";
}

/// The run's first line: model, storage and its parameters, layers, codec, piece size, repeats.
void print_setup(const Args& a, const k3::ModelConfig& c, const k3::PackedTrunk& raw, const k3::PackedTrunk& coded) {
  std::printf("model %s (%lld layers), storage %s", a.model.c_str(), static_cast<long long>(c.num_hidden_layers),
              a.storage.c_str());
  for (const auto& [k, v] : a.params) std::printf(" %s=%s", k.c_str(), v.c_str());
  std::printf("; layers %lld-%lld; codec %s, read in %.0f MiB pieces; %d repeats (median)\n",
              static_cast<long long>(raw.first_layer()), static_cast<long long>(raw.last_layer()),
              coded.codec().c_str(),
              static_cast<double>(a.coded_piece ? a.coded_piece : k3::streaming::TensorReader::kCodedPiece) / 1048576.0,
              a.repeats);
}

/// disk: the raw run `rr`, plainly, into `buf`.
void time_disk(k3::sdk::StorageFile& raw_bin, const k3::PackedRun& rr, std::byte* buf, Timing& t) {
  const auto t0 = Clock::now();
  read_plain(raw_bin, rr.file_offset, rr.padded_bytes(), buf);
  t.disk.push_back(since(t0));
}

/// raw or coded: layer `li` through its TensorReader into `slot`, as a ring slot is filled,
/// with the seconds it spent checking (and, coded, this thread's CPU seconds).
void time_through(k3::streaming::LayerLoader& loader, k3::streaming::TensorReader& reader, std::size_t li,
                  std::byte* slot, bool is_coded, Timing& t) {
  (void)loader.queue(li, false);  // at most `largest` bytes
  k3::maths::LayerWeights w;
  const std::uint64_t v0 = reader.verify_ns();
  const double c0 = cpu_seconds();
  const auto t0 = Clock::now();
  loader.read_and_bind(slot, w);
  const double s = since(t0);
  const double verify = static_cast<double>(reader.verify_ns() - v0) * 1e-9;
  (is_coded ? t.coded : t.raw).push_back(s);
  (is_coded ? t.coded_verify : t.raw_verify).push_back(verify);
  if (is_coded) t.coded_cpu.push_back(cpu_seconds() - c0);
}

/// decode alone: the coded run `cr` read into `coded_in`, then each tensor's stream decoded
/// into `out` on this thread, timed in CPU seconds.
void time_decode(k3::sdk::StorageFile& coded_bin, const k3::PackedRun& cr, std::byte* coded_in, std::byte* out,
                 k3::io::trunk_codec::Decoder& decoder, Timing& t) {
  read_plain(coded_bin, cr.file_offset, cr.padded_bytes(), coded_in);
  const double c0 = cpu_seconds();
  std::uint64_t decoded = 0;
  for (const k3::PackedTensor& pt : cr.tensors) {
    k3::io::trunk_codec::MemoryInput mi({coded_in + pt.coded_offset, static_cast<std::size_t>(pt.coded_bytes)});
    decoder.decode(mi, {out + pt.offset, static_cast<std::size_t>(pt.nbytes)}, pt.dtype == k3::DType::bf16);
    decoded += pt.nbytes;
  }
  t.decode_cpu.push_back(cpu_seconds() - c0);
  t.decoded_bytes = decoded;
}

/// The medians of a kind's measured layers, summed (and, for the whole trunk, scaled).
struct Sum {
  double n = 0, raw_bytes = 0, coded_bytes = 0, disk = 0, raw = 0, raw_verify = 0, coded = 0, coded_verify = 0;
};

/// The table of measured layers (medians of the repeats) and the decode line; returns the
/// sums per layer kind for the whole-trunk table.
std::map<std::string, Sum> print_layers(const k3::ModelConfig& c, const std::map<std::int64_t, Timing>& timing) {
  std::printf(
      "\n| layer | kind | raw MB | coded MB | ratio | disk s (GB/s) | raw s | raw verify s (share) | coded s "
      "| coded verify s (share) | coded reader CPU s | decode GB/s per core |\n");
  std::printf("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::map<std::string, Sum> kinds;
  double decoded_total = 0, decode_cpu_total = 0;
  for (const auto& [layer, t] : timing) {
    const double disk = median(t.disk), rs = median(t.raw), rv = median(t.raw_verify), cs = median(t.coded),
                 cv = median(t.coded_verify), dec = median(t.decode_cpu);
    const std::string kind = kind_of(c, layer);
    std::printf(
        "| %lld | %s | %.1f | %.1f | %.4f | %.3f (%.2f) | %.3f | %.3f (%.1f%%) | %.3f | %.3f (%.1f%%) "
        "| %.3f | %.2f |\n",
        static_cast<long long>(layer), kind.c_str(), static_cast<double>(t.raw_bytes) / 1e6,
        static_cast<double>(t.coded_bytes) / 1e6, static_cast<double>(t.coded_bytes) / static_cast<double>(t.raw_bytes),
        disk, static_cast<double>(t.raw_bytes) / 1e9 / disk, rs, rv, 100 * rv / rs, cs, cv, 100 * cv / cs,
        median(t.coded_cpu), static_cast<double>(t.decoded_bytes) / 1e9 / dec);
    Sum& k = kinds[kind];
    k.n += 1;
    k.raw_bytes += static_cast<double>(t.raw_bytes);
    k.coded_bytes += static_cast<double>(t.coded_bytes);
    k.disk += disk;
    k.raw += rs;
    k.raw_verify += rv;
    k.coded += cs;
    k.coded_verify += cv;
    decoded_total += static_cast<double>(t.decoded_bytes);
    decode_cpu_total += dec;
  }
  std::printf("\ndecode, all measured layers: %.2f GB/s of output per core (%.1f GB in %.2f s of one thread's CPU)\n",
              decoded_total / 1e9 / decode_cpu_total, decoded_total / 1e9, decode_cpu_total);
  return kinds;
}

/// The whole trunk: per kind, the mean of its measured layers times the model's count of it
/// (a kind not measured is left out, and said so), then coded against raw.
void print_whole_trunk(const k3::ModelConfig& c, const std::map<std::string, Sum>& kinds) {
  std::map<std::string, std::int64_t> counts;
  for (std::int64_t li = 0; li < c.num_hidden_layers; ++li) ++counts[kind_of(c, li)];
  std::printf("\nwhole trunk per token (%lld layers), per kind: mean of the measured layers x the model's count\n",
              static_cast<long long>(c.num_hidden_layers));
  std::printf(
      "| kind | layers in model | measured | raw GB | coded GB | disk s | raw s | raw verify s | coded s "
      "| coded verify s |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  Sum whole;
  bool complete = true;
  for (const auto& [kind, count] : counts) {
    const auto it = kinds.find(kind);
    if (it == kinds.end()) {
      std::printf("| %s | %lld | 0 | - | - | - | - | - | - | - |\n", kind.c_str(), static_cast<long long>(count));
      complete = false;
      continue;
    }
    const Sum& k = it->second;
    const double f = static_cast<double>(count) / k.n;
    std::printf("| %s | %lld | %.0f | %.2f | %.2f | %.1f | %.1f | %.2f | %.1f | %.2f |\n", kind.c_str(),
                static_cast<long long>(count), k.n, k.raw_bytes * f / 1e9, k.coded_bytes * f / 1e9, k.disk * f,
                k.raw * f, k.raw_verify * f, k.coded * f, k.coded_verify * f);
    whole.raw_bytes += k.raw_bytes * f;
    whole.coded_bytes += k.coded_bytes * f;
    whole.disk += k.disk * f;
    whole.raw += k.raw * f;
    whole.raw_verify += k.raw_verify * f;
    whole.coded += k.coded * f;
    whole.coded_verify += k.coded_verify * f;
  }
  std::printf("| **all**%s | %lld | | %.2f | %.2f | %.1f | %.1f | %.2f | %.1f | %.2f |\n",
              complete ? "" : " (kinds not measured left out)", static_cast<long long>(c.num_hidden_layers),
              whole.raw_bytes / 1e9, whole.coded_bytes / 1e9, whole.disk, whole.raw, whole.raw_verify, whole.coded,
              whole.coded_verify);
  std::printf("\ncoded/raw: bytes %.4f, seconds %.3f; verify share of the layer reads: raw %.1f%%, coded %.1f%%\n",
              whole.coded_bytes / whole.raw_bytes, whole.coded / whole.raw, 100 * whole.raw_verify / whole.raw,
              100 * whole.coded_verify / whole.coded);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    k3::PluginHost host;
    const auto storage = host.create_storage(a.storage, a.params);
    const k3::ModelConfig c = k3::read_model_config(*storage, a.model);
    const k3::CheckpointIndex index = k3::CheckpointIndex::open(*storage, a.model);
    const std::uint64_t identity = k3::checkpoint_identity(c, index);
    const k3::PackedTrunk raw = k3::PackedTrunk::open(*storage, a.raw, identity, a.model, c.num_hidden_layers);
    const k3::PackedTrunk coded = k3::PackedTrunk::open(*storage, a.coded, identity, a.model, c.num_hidden_layers);
    if (raw.codec() != "none" || coded.codec() == "none")
      throw k3::UsageError("--raw must be a pack without a codec and --coded one with a codec");
    if (raw.first_layer() != coded.first_layer() || raw.last_layer() != coded.last_layer())
      throw k3::UsageError("--raw and --coded must pack the same layers");
    const k3::streaming::PackedLocations raw_where = k3::streaming::PackedLocations::of(raw);
    const k3::streaming::PackedLocations coded_where = k3::streaming::PackedLocations::of(coded);
    k3::streaming::TensorReader raw_reader(index, *storage, &raw_where), coded_reader(index, *storage, &coded_where);
    coded_reader.set_coded_piece(a.coded_piece);
    k3::streaming::LayerLoader raw_loader(c, raw_reader), coded_loader(c, coded_reader);
    std::unique_ptr<k3::sdk::StorageFile> raw_bin, coded_bin;
    if (const auto st = storage->open(raw.bin_uri(), raw_bin); !st.ok()) throw k3::RuntimeError(st.detail);
    if (const auto st = storage->open(coded.bin_uri(), coded_bin); !st.ok()) throw k3::RuntimeError(st.detail);
    k3::io::trunk_codec::Decoder decoder;
    print_setup(a, c, raw, coded);

    // One buffer for each use, as large as the largest layer and touched once before any
    // timing: a ring slot is reused every token, so page faults of fresh memory (the kernel
    // zeroing ~1.2 GB a layer) belong to no read or decode and would be timed here otherwise.
    std::uint64_t largest = 0;
    for (const k3::PackedRun& r : raw.layers())
      largest = std::max({largest, r.padded_bytes(), raw_loader.queue(static_cast<std::size_t>(r.layer), false)});
    k3::AlignedBuffer disk_buf(largest), slot(largest), coded_in(largest), out(largest);
    for (k3::AlignedBuffer* b : {&disk_buf, &slot, &coded_in, &out}) std::memset(b->data(), 0, largest);

    std::map<std::int64_t, Timing> timing;
    for (int rep = 0; rep < a.repeats; ++rep)
      for (std::size_t i = 0; i < raw.layers().size(); ++i) {
        const k3::PackedRun& rr = raw.layers()[i];
        const k3::PackedRun& cr = coded.layers()[i];
        const auto li = static_cast<std::size_t>(rr.layer);
        Timing& t = timing[rr.layer];
        t.raw_bytes = rr.nbytes;
        t.coded_bytes = cr.coded_bytes;
        // disk, raw and coded in an order rotated every repeat: a virtual disk's host may
        // cache what was just read (disk and raw read the same bytes), so none always goes first.
        for (int k = 0; k < 3; ++k) switch ((k + rep) % 3) {
            case 0: time_disk(*raw_bin, rr, disk_buf.data(), t); break;
            case 1: time_through(raw_loader, raw_reader, li, slot.data(), false, t); break;
            default: time_through(coded_loader, coded_reader, li, slot.data(), true, t); break;
          }
        time_decode(*coded_bin, cr, coded_in.data(), out.data(), decoder, t);
      }

    print_whole_trunk(c, print_layers(c, timing));
    return 0;
  } catch (const k3::UsageError& e) {
    std::fprintf(stderr, "k3bench-packed-layers: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "k3bench-packed-layers: %s\n", e.what());
    return 1;
  }
}
