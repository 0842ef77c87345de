// k3bench-kernels: weight bytes per second of every kernel set at the real K3 matrix shapes,
// on 1 and 2 threads, next to this machine's memory read bandwidth measured in the same run.
//
// Each measurement cycles through enough copies of the matrix (>= --working-set MiB) that the
// weights come from memory, not from a cache, as they do in the engine. Threads split the
// output rows (the host's rule); a kernel never splits a reduction. Rates are weight bytes
// read per second (bf16 2 B, f32 4 B, MXFP4 17/32 B per weight incl. scales).
//
// With --positions N it measures instead what a batch of N positions (draft verification,
// prefill) costs: one call with batch N against N calls with batch 1 on the same weights and
// activations, alternating the two in --rounds rounds, at the K3 shapes 7168x3072 and
// 3072x7168 (an MXFP4 expert's up/gate and down), one thread (pin it with taskset). The
// ratio is (one batch-N call) / (N batch-1 calls): 1/N would mean positions cost nothing.
// Beside it, the least time any AVX2 kernel can take for the batch-N call under the numerics
// contract (every multiply-add an fp64 FMA, 4 per ymm) at this core's measured FMA rate, and
// where the core has AVX-512F the same for an AVX-512 kernel (8 per zmm, its own rate).
//
//   k3bench-kernels [--sets scalar,avx2,avx512] [--kernels bf16,mxfp4,f32] [--threads 1,2]
//                   [--batch 1] [--lm-head-rows 16384] [--min-time 0.4] [--working-set 512]
//                   [--positions N [--rounds 3]]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <k3/plugin_host.hpp>

#include "maths/row_blocks.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<std::string> sets;  // empty: every runnable set
  std::vector<std::string> kernels{"bf16", "mxfp4", "f32"};
  std::vector<int> threads{1, 2};
  std::size_t batch = 1;
  std::size_t lm_head_rows = 16384;
  double min_time = 0.4;
  std::size_t working_set_mib = 512;
  std::size_t positions = 0;  // > 0: the batch-N vs N x batch-1 table instead
  int rounds = 3;
};

struct Shape {
  const char* name;
  std::size_t rows;
  std::size_t cols;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::puts(
          "k3bench-kernels [--sets a,b] [--kernels bf16,mxfp4,f32] [--threads 1,2] [--batch N]\n"
          "                [--lm-head-rows N] [--min-time SECONDS] [--working-set MiB]\n"
          "                [--positions N [--rounds R]]");
      std::exit(0);
    }
    if (i + 1 >= argc) throw std::invalid_argument(arg + ": missing value");
    const std::string v = argv[++i];
    if (arg == "--sets")
      o.sets = split(v);
    else if (arg == "--kernels")
      o.kernels = split(v);
    else if (arg == "--threads") {
      o.threads.clear();
      for (const auto& t : split(v)) o.threads.push_back(std::stoi(t));
    } else if (arg == "--batch")
      o.batch = std::stoul(v);
    else if (arg == "--lm-head-rows")
      o.lm_head_rows = std::stoul(v);
    else if (arg == "--min-time")
      o.min_time = std::stod(v);
    else if (arg == "--working-set")
      o.working_set_mib = std::stoul(v);
    else if (arg == "--positions")
      o.positions = std::stoul(v);
    else if (arg == "--rounds")
      o.rounds = std::stoi(v);
    else
      throw std::invalid_argument("unknown option " + arg);
  }
  return o;
}

/// splitmix64: fast reproducible fill for hundreds of MiB.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

/// Moderate fp32 values (|v| in [2^-8, 2^8)) with random signs, like real activations.
float moderate(Rng& r) {
  const std::uint64_t u = r.next();
  const auto bits = static_cast<std::uint32_t>((u & 0x807FFFFFu) | ((119u + (u >> 40) % 16u) << 23));
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// `copies` back-to-back copies of one random matrix in the kernel's format.
struct Weights {
  std::vector<std::uint16_t> bf16;
  std::vector<float> f32;
  std::vector<std::uint8_t> packed;
  std::vector<std::uint8_t> scales;
  std::size_t bytes_per_copy = 0;
};

Weights make_weights(const std::string& kernel, const Shape& s, std::size_t copies) {
  Weights w;
  Rng rng{42};
  const std::size_t n = s.rows * s.cols;
  if (kernel == "bf16") {
    w.bf16.resize(n * copies);
    for (std::size_t i = 0; i < n; ++i) {
      const float v = moderate(rng);
      std::uint32_t b;
      std::memcpy(&b, &v, sizeof b);
      w.bf16[i] = static_cast<std::uint16_t>(b >> 16);
    }
    for (std::size_t c = 1; c < copies; ++c) std::memcpy(w.bf16.data() + c * n, w.bf16.data(), n * 2);
    w.bytes_per_copy = n * 2;
  } else if (kernel == "f32") {
    w.f32.resize(n * copies);
    for (std::size_t i = 0; i < n; ++i) w.f32[i] = moderate(rng);
    for (std::size_t c = 1; c < copies; ++c) std::memcpy(w.f32.data() + c * n, w.f32.data(), n * 4);
    w.bytes_per_copy = n * 4;
  } else {
    const std::size_t pbytes = s.rows * ((s.cols + 1) / 2);
    const std::size_t sbytes = s.rows * ((s.cols + 31) / 32);
    w.packed.resize(pbytes * copies);
    w.scales.resize(sbytes * copies);
    for (std::size_t i = 0; i < pbytes; ++i) w.packed[i] = static_cast<std::uint8_t>(rng.next());
    for (std::size_t i = 0; i < sbytes; ++i) w.scales[i] = static_cast<std::uint8_t>(112 + rng.next() % 16);
    for (std::size_t c = 1; c < copies; ++c) {
      std::memcpy(w.packed.data() + c * pbytes, w.packed.data(), pbytes);
      std::memcpy(w.scales.data() + c * sbytes, w.scales.data(), sbytes);
    }
    w.bytes_per_copy = pbytes + sbytes;
  }
  return w;
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// Bytes per second of wall time, and per second of CPU time summed over the threads (the
/// per-core rate; on a busy machine it shows what the kernel does when it gets a core).
struct Rate {
  double wall = 0;
  double per_cpu = 0;
};

/// Runs `body(copy)` over the copies in turn until min_time has passed.
template <class Body>
Rate measure(double min_time, std::size_t copies, std::size_t bytes_per_call, Body&& body) {
  body(0);  // warm-up (every copy is already paged in: make_weights wrote it)
  std::size_t calls = 0;
  const auto start = Clock::now();
  const double cpu_start = process_cpu_seconds();
  double elapsed = 0;
  do {
    body(calls % copies);
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < min_time);
  const double bytes = static_cast<double>(bytes_per_call) * static_cast<double>(calls);
  return {bytes / elapsed, bytes / (process_cpu_seconds() - cpu_start)};
}

/// Memory read bandwidth: a streaming 64-bit integer sum over `mib` MiB, in 512 KiB pieces
/// split over the threads by the matmuls' rule (maths/row_blocks.hpp: a contiguous share
/// per thread, the back half of the largest share to a thread that runs out), so a slower
/// vCPU does not hold back the faster one and each thread reads one long stream.
Rate memory_bandwidth(int threads, std::size_t mib, double min_time) {
  const std::size_t n = mib * 1024 * 1024 / 8;
  constexpr std::size_t kPiece = std::size_t{1} << 16;  // 64-bit words: 512 KiB
  std::vector<std::uint64_t> buf(n);
  for (std::size_t i = 0; i < n; ++i) buf[i] = i * 0x9E3779B97F4A7C15ull;
  volatile std::uint64_t sink = 0;
  return measure(min_time, 1, n * 8, [&](std::size_t) {
    std::uint64_t total = 0;
    k3::maths::BlockShares pieces((n + kPiece - 1) / kPiece, threads);
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      const auto t = static_cast<std::size_t>(omp_get_thread_num());
      while (const std::optional<std::size_t> p = pieces.next(t)) {
        const std::size_t begin = *p * kPiece;
        const std::size_t end = std::min(n, begin + kPiece);
        for (std::size_t i = begin; i < end; ++i) total += buf[i];
      }
    }
    sink = sink + total;
  });
}

/// Runs one matmul over all rows, split over `threads` OpenMP threads by the host's rule
/// (maths/row_blocks.hpp: 64-row blocks in a contiguous share per thread, with stealing).
void run(const k3::sdk::KernelSet& set, const std::string& kernel, const Shape& s, const Weights& w, std::size_t copy,
         const std::vector<float>& x, std::size_t batch, std::vector<float>& y, int threads) {
  const std::size_t n = s.rows * s.cols;
  k3::maths::for_row_blocks(s.rows, threads, [&](k3::sdk::RowRange range) {
    if (kernel == "bf16") {
      set.matmul_bf16(w.bf16.data() + copy * n, s.rows, s.cols, range, x.data(), batch, y.data());
    } else if (kernel == "f32") {
      set.matmul_f32(w.f32.data() + copy * n, s.rows, s.cols, range, x.data(), batch, y.data());
    } else {
      const std::size_t pbytes = s.rows * ((s.cols + 1) / 2);
      const std::size_t sbytes = s.rows * ((s.cols + 31) / 32);
      const k3::sdk::Mxfp4Matrix m{w.packed.data() + copy * pbytes, w.scales.data() + copy * sbytes, s.rows, s.cols};
      set.matmul_mxfp4(m, range, x.data(), batch, y.data());
    }
  });
}

/// One kernel call with `batch` positions at x (over all rows, one thread).
void call(const k3::sdk::KernelSet& set, const std::string& kernel, const Shape& s, const Weights& w, std::size_t copy,
          const float* x, std::size_t batch, float* y) {
  const std::size_t n = s.rows * s.cols;
  const k3::sdk::RowRange all{0, s.rows};
  if (kernel == "bf16") {
    set.matmul_bf16(w.bf16.data() + copy * n, s.rows, s.cols, all, x, batch, y);
  } else if (kernel == "f32") {
    set.matmul_f32(w.f32.data() + copy * n, s.rows, s.cols, all, x, batch, y);
  } else {
    const std::size_t pbytes = s.rows * ((s.cols + 1) / 2);
    const std::size_t sbytes = s.rows * ((s.cols + 31) / 32);
    const k3::sdk::Mxfp4Matrix m{w.packed.data() + copy * pbytes, w.scales.data() + copy * sbytes, s.rows, s.cols};
    set.matmul_mxfp4(m, all, x, batch, y);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 != 0 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

/// Independent ymm fp64 FMAs per CPU-second on this core, all in registers (10 accumulators,
/// so the FMA latency never limits): the ceiling of any AVX2 kernel's multiply-adds, 4 per
/// FMA. 0 where there is no x86-64 FMA. Inline asm, so it needs no -mfma here.
double ymm_fma_per_second() {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("fma") || !__builtin_cpu_supports("avx2")) return 0;
  constexpr long kIterations = 50'000'000;
  const double start = process_cpu_seconds();
  __asm__ volatile(
      "vxorpd %%ymm0,%%ymm0,%%ymm0\n vxorpd %%ymm1,%%ymm1,%%ymm1\n vxorpd %%ymm2,%%ymm2,%%ymm2\n"
      "vxorpd %%ymm3,%%ymm3,%%ymm3\n vxorpd %%ymm4,%%ymm4,%%ymm4\n vxorpd %%ymm5,%%ymm5,%%ymm5\n"
      "vxorpd %%ymm6,%%ymm6,%%ymm6\n vxorpd %%ymm7,%%ymm7,%%ymm7\n vxorpd %%ymm8,%%ymm8,%%ymm8\n"
      "vxorpd %%ymm9,%%ymm9,%%ymm9\n vxorpd %%ymm14,%%ymm14,%%ymm14\n vxorpd %%ymm15,%%ymm15,%%ymm15\n"
      "mov %0, %%rcx\n"
      "1:\n"
      "vfmadd231pd %%ymm14,%%ymm15,%%ymm0\n vfmadd231pd %%ymm14,%%ymm15,%%ymm1\n"
      "vfmadd231pd %%ymm14,%%ymm15,%%ymm2\n vfmadd231pd %%ymm14,%%ymm15,%%ymm3\n"
      "vfmadd231pd %%ymm14,%%ymm15,%%ymm4\n vfmadd231pd %%ymm14,%%ymm15,%%ymm5\n"
      "vfmadd231pd %%ymm14,%%ymm15,%%ymm6\n vfmadd231pd %%ymm14,%%ymm15,%%ymm7\n"
      "vfmadd231pd %%ymm14,%%ymm15,%%ymm8\n vfmadd231pd %%ymm14,%%ymm15,%%ymm9\n"
      "dec %%rcx\n jnz 1b\n vzeroupper\n"
      :
      : "r"(kIterations)
      : "rcx", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm14", "xmm15", "cc");
  return 10.0 * static_cast<double>(kIterations) / (process_cpu_seconds() - start);
#else
  return 0;
#endif
}

/// The same with zmm FMAs (8 per FMA): the ceiling of an AVX-512 kernel's multiply-adds.
/// On a core with one 512-bit FMA pipe it is half the ymm rate in doubles, on one with two
/// the same; only measuring tells which. 0 without AVX-512F.
double zmm_fma_per_second() {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx512f")) return 0;
  constexpr long kIterations = 50'000'000;
  const double start = process_cpu_seconds();
  __asm__ volatile(
      "vxorpd %%zmm0,%%zmm0,%%zmm0\n vxorpd %%zmm1,%%zmm1,%%zmm1\n vxorpd %%zmm2,%%zmm2,%%zmm2\n"
      "vxorpd %%zmm3,%%zmm3,%%zmm3\n vxorpd %%zmm4,%%zmm4,%%zmm4\n vxorpd %%zmm5,%%zmm5,%%zmm5\n"
      "vxorpd %%zmm6,%%zmm6,%%zmm6\n vxorpd %%zmm7,%%zmm7,%%zmm7\n vxorpd %%zmm8,%%zmm8,%%zmm8\n"
      "vxorpd %%zmm9,%%zmm9,%%zmm9\n vxorpd %%zmm14,%%zmm14,%%zmm14\n vxorpd %%zmm15,%%zmm15,%%zmm15\n"
      "mov %0, %%rcx\n"
      "1:\n"
      "vfmadd231pd %%zmm14,%%zmm15,%%zmm0\n vfmadd231pd %%zmm14,%%zmm15,%%zmm1\n"
      "vfmadd231pd %%zmm14,%%zmm15,%%zmm2\n vfmadd231pd %%zmm14,%%zmm15,%%zmm3\n"
      "vfmadd231pd %%zmm14,%%zmm15,%%zmm4\n vfmadd231pd %%zmm14,%%zmm15,%%zmm5\n"
      "vfmadd231pd %%zmm14,%%zmm15,%%zmm6\n vfmadd231pd %%zmm14,%%zmm15,%%zmm7\n"
      "vfmadd231pd %%zmm14,%%zmm15,%%zmm8\n vfmadd231pd %%zmm14,%%zmm15,%%zmm9\n"
      "dec %%rcx\n jnz 1b\n vzeroupper\n"
      :
      : "r"(kIterations)
      : "rcx", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm14", "xmm15", "cc");
  return 10.0 * static_cast<double>(kIterations) / (process_cpu_seconds() - start);
#else
  return 0;
#endif
}

/// The instruction mix of the avx512 bf16 position tile (plugins/kernels/avx512), in
/// registers and L1 only: per row of 3, 8 bf16 weights broadcast from memory, one byte
/// shuffle into fp32, one widening to fp64, then an FMA per position with that position's
/// activations (a load from L1, shared by the 3 rows). On Intel cores the shuffle and the
/// widening run on the same two ports as the 512-bit FMAs, so this rate, not the FMA
/// ceiling, bounds a bf16 batch call that keeps the fp64 contract. Returns FMAs per
/// CPU-second (24 per iteration); 0 without AVX-512F.
#if defined(__x86_64__)
// zmm16-31 exist (and may be clobbered) only for an AVX-512 target; called only where the
// CPU has it.
__attribute__((target("avx512f,avx2"), noinline))
#endif
double
zmm_bf16_tile_fma_per_second() {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx2")) return 0;
  constexpr long kIterations = 20'000'000;
  alignas(64) static const std::uint16_t weights[3 * 8] = {};
  alignas(64) static const double activations[8 * 8] = {};
  alignas(32) static const std::uint8_t to_high_halves[32] = {0x80, 0x80, 0,  1,  0x80, 0x80, 2,  3, 0x80, 0x80, 4,  5,
                                                              0x80, 0x80, 6,  7,  0x80, 0x80, 8,  9, 0x80, 0x80, 10, 11,
                                                              0x80, 0x80, 12, 13, 0x80, 0x80, 14, 15};
  const double start = process_cpu_seconds();
// Accumulators zmm8-31, weights zmm3-5, activations zmm6, the shuffle in ymm0-2 (VEX
// encodings, as the compiled kernel uses).
#define K3_ZERO(r) "vpxorq %%zmm" #r ",%%zmm" #r ",%%zmm" #r "\n"
#define K3_WIDEN(row, w) \
  "vbroadcasti128 " #row "*16(%1),%%ymm1\n vpshufb %%ymm0,%%ymm1,%%ymm1\n vcvtps2pd %%ymm1,%%zmm" #w "\n"
#define K3_POSITION(p, a0, a1, a2)                                                                              \
  "vmovapd " #p "*64(%2),%%zmm6\n vfmadd231pd %%zmm3,%%zmm6,%%zmm" #a0 "\n vfmadd231pd %%zmm4,%%zmm6,%%zmm" #a1 \
  "\n vfmadd231pd %%zmm5,%%zmm6,%%zmm" #a2 "\n"
  __asm__ volatile(
      K3_ZERO(8) K3_ZERO(9) K3_ZERO(10) K3_ZERO(11) K3_ZERO(12) K3_ZERO(13) K3_ZERO(14) K3_ZERO(15) K3_ZERO(16)
      K3_ZERO(17) K3_ZERO(18) K3_ZERO(19) K3_ZERO(20) K3_ZERO(21) K3_ZERO(22) K3_ZERO(23) K3_ZERO(24) K3_ZERO(25)
      K3_ZERO(26) K3_ZERO(27) K3_ZERO(28) K3_ZERO(29) K3_ZERO(30) K3_ZERO(31)
      "vmovdqa (%3),%%ymm0\n"
      "mov %0, %%rcx\n"
      "1:\n" K3_WIDEN(0, 3) K3_WIDEN(1, 4) K3_WIDEN(2, 5) K3_POSITION(0, 8, 9, 10) K3_POSITION(1, 11, 12, 13)
      K3_POSITION(2, 14, 15, 16) K3_POSITION(3, 17, 18, 19) K3_POSITION(4, 20, 21, 22) K3_POSITION(5, 23, 24, 25)
      K3_POSITION(6, 26, 27, 28) K3_POSITION(7, 29, 30, 31)
      "dec %%rcx\n jnz 1b\n vzeroupper\n"
      :
      : "r"(kIterations), "r"(weights), "r"(activations), "r"(to_high_halves)
      : "rcx", "xmm0", "xmm1", "xmm3", "xmm4", "xmm5", "xmm6", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
        "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25",
        "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", "cc", "memory");
#undef K3_ZERO
#undef K3_WIDEN
#undef K3_POSITION
  return 24.0 * static_cast<double>(kIterations) / (process_cpu_seconds() - start);
#else
  return 0;
#endif
}

/// The --positions table: per kernel, shape and set, the time of one call with batch N and
/// of N calls with batch 1 (each the median over the rounds, which alternate the two), and
/// their ratio. Times are CPU time of the process (one thread), which a busy machine does
/// not inflate the way it inflates wall time; the wall-time ratio is printed beside it.
/// Weights cycle through copies as in the bandwidth table, so they come from memory each
/// time, as when the engine streams them.
void positions_table(const Options& opt, const std::vector<std::string>& sets,
                     std::map<std::string, std::shared_ptr<k3::sdk::KernelSet>>& loaded) {
  const std::size_t n = opt.positions;
  const Shape shapes[] = {{"7168x3072", 7168, 3072}, {"3072x7168", 3072, 7168}};
  const double fma_rate = ymm_fma_per_second();
  if (fma_rate > 0)
    std::printf(
        "# fp64 FMA ceiling of this core: %.2f G ymm FMAs per CPU-second (registers only); the avx2 floor\n"
        "# of a batch-%zu call is rows x cols x %zu / 4 of them\n\n",
        fma_rate / 1e9, n, n);
  const double zmm_rate = zmm_fma_per_second();
  if (zmm_rate > 0)
    std::printf(
        "# fp64 FMA ceiling with zmm: %.2f G zmm FMAs per CPU-second; the avx512 floor of a batch-%zu call\n"
        "# is rows x cols x %zu / 8 of them\n\n",
        zmm_rate / 1e9, n, n);
  const double bf16_mix_rate = zmm_bf16_tile_fma_per_second();
  if (bf16_mix_rate > 0)
    std::printf(
        "# the avx512 bf16 tile's instruction mix (3 rows x 8 positions: broadcast, shuffle, widen, FMAs),\n"
        "# registers and L1 only: %.2f G zmm FMAs per CPU-second, %.3f of the FMA ceiling; the bf16 rows'\n"
        "# last column is the avx512 floor of a batch-%zu bf16 call at that rate\n\n",
        bf16_mix_rate / 1e9, zmm_rate > 0 ? bf16_mix_rate / zmm_rate : 0.0, n);
  std::printf(
      "| kernel | shape (rows x cols) | set | 1 call, batch %zu (CPU ms) | %zu calls, batch 1 (CPU ms) | ratio "
      "| ratio of wall times | avx2 FMA floor, batch %zu (ms) | avx512 FMA floor, batch %zu (ms) "
      "| avx512 bf16 tile-mix floor (ms) |\n",
      n, n, n, n);
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& kernel : opt.kernels) {
    for (const Shape& s : shapes) {
      const std::size_t bytes = make_weights(kernel, s, 1).bytes_per_copy;
      const std::size_t copies = std::max<std::size_t>(1, (opt.working_set_mib * 1024 * 1024 + bytes - 1) / bytes);
      const Weights w = make_weights(kernel, s, copies);
      Rng rng{7};
      std::vector<float> x(n * s.cols);
      for (auto& v : x) v = moderate(rng);
      std::vector<float> y(n * s.rows);
      for (const auto& name : sets) {
        const auto& set = *loaded[name];
        std::vector<double> cpu_batched, cpu_singles, wall_batched, wall_singles;
        for (int round = 0; round < opt.rounds; ++round) {
          const Rate b = measure(opt.min_time, copies, bytes,
                                 [&](std::size_t c) { call(set, kernel, s, w, c, x.data(), n, y.data()); });
          const Rate one = measure(opt.min_time, copies, bytes, [&](std::size_t c) {
            for (std::size_t p = 0; p < n; ++p)
              call(set, kernel, s, w, c, x.data() + p * s.cols, 1, y.data() + p * s.rows);
          });
          // A rate is bytes per second; bytes / rate is the time of one call (of the body).
          cpu_batched.push_back(static_cast<double>(bytes) / b.per_cpu);
          cpu_singles.push_back(static_cast<double>(bytes) / one.per_cpu);
          wall_batched.push_back(static_cast<double>(bytes) / b.wall);
          wall_singles.push_back(static_cast<double>(bytes) / one.wall);
        }
        const double tb = median(cpu_batched);
        const double t1 = median(cpu_singles);
        const double floor_ms = fma_rate > 0 ? 1e3 * static_cast<double>(s.rows * s.cols * n) / 4.0 / fma_rate : 0.0;
        const double zmm_floor_ms = zmm_rate > 0 ? 1e3 * static_cast<double>(s.rows * s.cols * n) / 8.0 / zmm_rate
                                                 : 0.0;
        const double mix_floor_ms = kernel == "bf16" && bf16_mix_rate > 0
                                        ? 1e3 * static_cast<double>(s.rows * s.cols * n) / 8.0 / bf16_mix_rate
                                        : 0.0;
        char mix[32] = "-";
        if (mix_floor_ms > 0) std::snprintf(mix, sizeof mix, "%.2f", mix_floor_ms);
        std::printf("| %s | %s | %s | %.2f | %.2f | %.3f | %.3f | %.2f | %.2f | %s |\n", kernel.c_str(), s.name,
                    name.c_str(), 1e3 * tb, 1e3 * t1, tb / t1, median(wall_batched) / median(wall_singles), floor_ms,
                    zmm_floor_ms, mix);
        std::fflush(stdout);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const Options opt = parse(argc, argv);
  k3::PluginHost host;
  std::vector<std::string> sets = opt.sets;
  if (sets.empty()) {
    for (const char* name : {"scalar", "avx2", "avx512", "neon"})
      for (const auto& info : host.plugins())
        if (info.kind == k3::PluginKind::kernels && info.name == name && info.score > 0) sets.push_back(name);
  }
  std::map<std::string, std::shared_ptr<k3::sdk::KernelSet>> loaded;
  for (const auto& name : sets) loaded[name] = host.create_kernels(name, {});

  if (opt.positions > 0) {
    positions_table(opt, sets, loaded);
    return 0;
  }

  const Shape shapes[] = {{"7168x12288", 7168, 12288}, {"12288x7168", 12288, 7168},
                          {"3072x3584", 3072, 3584},   {"3584x3072", 3584, 3072},
                          {"896x7168", 896, 7168},     {"lm_head", opt.lm_head_rows, 7168}};

  std::printf("# memory read bandwidth (streaming 64-bit sum over %zu MiB)\n", opt.working_set_mib);
  std::map<int, Rate> membw;
  for (int t : opt.threads) {
    membw[t] = memory_bandwidth(t, opt.working_set_mib, opt.min_time);
    std::printf("threads %d: %.2f GB/s (%.2f GB/s per CPU-second)\n", t, membw[t].wall / 1e9, membw[t].per_cpu / 1e9);
  }
  std::printf(
      "\n| kernel | shape (rows x cols) | set | threads | batch | GB/s of weights | %% of mem BW | x scalar | GB/s "
      "per CPU-second |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& kernel : opt.kernels) {
    for (const Shape& s : shapes) {
      Weights probe = make_weights(kernel, s, 1);
      const std::size_t bytes = probe.bytes_per_copy;
      probe = Weights{};
      const std::size_t copies = std::max<std::size_t>(1, (opt.working_set_mib * 1024 * 1024 + bytes - 1) / bytes);
      const Weights w = make_weights(kernel, s, copies);
      Rng rng{7};
      std::vector<float> x(opt.batch * s.cols);
      for (auto& v : x) v = moderate(rng);
      std::vector<float> y(opt.batch * s.rows);
      for (int t : opt.threads) {
        double scalar_rate = 0;
        for (const auto& name : sets) {
          const auto& set = *loaded[name];
          const Rate rate = measure(opt.min_time, copies, bytes,
                                    [&](std::size_t c) { run(set, kernel, s, w, c, x, opt.batch, y, t); });
          if (name == "scalar") scalar_rate = rate.wall;
          char ratio[32] = "-";
          if (scalar_rate > 0) std::snprintf(ratio, sizeof ratio, "%.1f", rate.wall / scalar_rate);
          std::printf("| %s | %s (%zux%zu) | %s | %d | %zu | %.2f | %.0f%% | %s | %.2f |\n", kernel.c_str(), s.name,
                      s.rows, s.cols, name.c_str(), t, opt.batch, rate.wall / 1e9, 100.0 * rate.wall / membw[t].wall,
                      ratio, rate.per_cpu / 1e9);
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "k3bench-kernels: %s\n", e.what());
  return 2;
}
