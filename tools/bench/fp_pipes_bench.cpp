// k3bench-fp-pipes: how fast this core retires the AVX-512 instructions an MXFP4 decode is
// built from, with no memory traffic at all. That is the ceiling of any MXFP4 kernel made of
// that instruction mix, whatever its loads, prefetches and loop do (docs/benchmarks-log.md,
// "Why MXFP4 stops near 60%").
//
// Three parts, all in cycles measured against a dependent chain of integer adds (1 cycle each
// on every x86-64 core we know of), so clock changes between runs cancel out:
//   1. each instruction alone: instructions per cycle;
//   2. each instruction mixed 1:1 with independent FMAs: if the pair takes as long as both
//      counts on two pipes, the instruction competes with the FMA for its pipes;
//   3. decode mixes, as a row tile of 8 rows × 32 weights (one MXFP4 group per row) in
//      registers, 4 FMAs per row into 8 accumulators like the kernel. The result is weights
//      per cycle and GB/s of MXFP4 (17/32 byte per weight) per core at the measured clock.
//
//   k3bench-fp-pipes [--rounds 5]      (x86-64 with AVX-512F/BW only; prints why otherwise)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__)

namespace {

using Clock = std::chrono::steady_clock;

// Every block below is one asm statement that names all vector and mask registers it writes.
#define K3_CLOBBERS                                                                                                   \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", \
      "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25",     \
      "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", "k1", "k2", "k3", "memory"

// 16 independent FMAs: zmm0-15 += zmm30 * zmm31 (16 accumulators, so latency 4 never limits).
#define FMA16                                                                   \
  "vfmadd231pd %%zmm30,%%zmm31,%%zmm0\n vfmadd231pd %%zmm30,%%zmm31,%%zmm1\n"   \
  "vfmadd231pd %%zmm30,%%zmm31,%%zmm2\n vfmadd231pd %%zmm30,%%zmm31,%%zmm3\n"   \
  "vfmadd231pd %%zmm30,%%zmm31,%%zmm4\n vfmadd231pd %%zmm30,%%zmm31,%%zmm5\n"   \
  "vfmadd231pd %%zmm30,%%zmm31,%%zmm6\n vfmadd231pd %%zmm30,%%zmm31,%%zmm7\n"   \
  "vfmadd231pd %%zmm30,%%zmm31,%%zmm8\n vfmadd231pd %%zmm30,%%zmm31,%%zmm9\n"   \
  "vfmadd231pd %%zmm30,%%zmm31,%%zmm10\n vfmadd231pd %%zmm30,%%zmm31,%%zmm11\n" \
  "vfmadd231pd %%zmm30,%%zmm31,%%zmm12\n vfmadd231pd %%zmm30,%%zmm31,%%zmm13\n" \
  "vfmadd231pd %%zmm30,%%zmm31,%%zmm14\n vfmadd231pd %%zmm30,%%zmm31,%%zmm15\n"
// 16 instances of a 3-operand instruction `op src, src, dst` into zmm16-23, each register
// written twice. Only `vpermi2pd` also reads its destination (its index), which makes pairs
// of it dependent: its figure is a lower bound.
// clang-format 14 wraps these two macros differently on every pass, so it leaves them alone:
// clang-format off
#define X2(op, d) op " %%zmm28,%%zmm29,%%zmm" #d "\n"
#define X16(op)                                                                                         \
  X2(op, 16) X2(op, 17) X2(op, 18) X2(op, 19) X2(op, 20) X2(op, 21) X2(op, 22) X2(op, 23) X2(op, 16) \
      X2(op, 17) X2(op, 18) X2(op, 19) X2(op, 20) X2(op, 21) X2(op, 22) X2(op, 23)
#define I2(op, d) op " $32,%%zmm29,%%zmm" #d "\n"
#define I16(op)                                                                                         \
  I2(op, 16) I2(op, 17) I2(op, 18) I2(op, 19) I2(op, 20) I2(op, 21) I2(op, 22) I2(op, 23) I2(op, 16) \
      I2(op, 17) I2(op, 18) I2(op, 19) I2(op, 20) I2(op, 21) I2(op, 22) I2(op, 23)
// clang-format on

// Each block runs its loop inside one asm statement, after zeroing every vector register (so
// no FMA ever sees a denormal or NaN) and setting the masks to all ones.
#define Z4(a, b, c, d)                                                                   \
  "vpxord %%zmm" #a ",%%zmm" #a ",%%zmm" #a "\n vpxord %%zmm" #b ",%%zmm" #b ",%%zmm" #b \
  "\n"                                                                                   \
  "vpxord %%zmm" #c ",%%zmm" #c ",%%zmm" #c "\n vpxord %%zmm" #d ",%%zmm" #d ",%%zmm" #d "\n"
#define K3_PREAMBLE \
  Z4(0, 1, 2, 3) Z4(4, 5, 6, 7) Z4(8, 9, 10, 11) Z4(12, 13, 14, 15) Z4(16, 17, 18, 19)            \
      Z4(20, 21, 22, 23) Z4(24, 25, 26, 27) Z4(28, 29, 30, 31) "kxnorq %%k1,%%k1,%%k1\n"          \
                                                              "kxnorw %%k2,%%k2,%%k2\n kxnorb %%k3,%%k3,%%k3\n"
#define K3_BLOCK(name, body)                                                                        \
  void name(long n, const unsigned char* buf) {                                                     \
    asm volatile(K3_PREAMBLE "1:\n" body "dec %1\n jnz 1b\n" : "+r"(buf), "+r"(n) : : K3_CLOBBERS); \
  }

// The calibration: 10 dependent adds per iteration.
void add_chain(long n, const unsigned char*) {
  long a = 0;
  asm volatile(
      "1:\n add $1,%0\n add $1,%0\n add $1,%0\n add $1,%0\n add $1,%0\n"
      "add $1,%0\n add $1,%0\n add $1,%0\n add $1,%0\n add $1,%0\n dec %1\n jnz 1b\n"
      : "+r"(a), "+r"(n));
}
constexpr double kAddChainCycles = 10.0;

K3_BLOCK(fma16, FMA16)
#define K3_PAIR(name, text) K3_BLOCK(alone_##name, text) K3_BLOCK(with_fma_##name, FMA16 text)
K3_PAIR(vpermd, X16("vpermd"))
K3_PAIR(vpermw, X16("vpermw"))
K3_PAIR(vpermi2pd, X16("vpermi2pd"))
K3_PAIR(vpsrlvd, X16("vpsrlvd"))
K3_PAIR(vpsllq_imm, I16("vpsllq"))
K3_PAIR(vpandq, X16("vpandq"))
K3_PAIR(vpunpckldq, X16("vpunpckldq"))
K3_PAIR(vpblendmq, X16("vpblendmq"))
K3_PAIR(vprolvq, X16("vprolvq"))
K3_PAIR(vaddpd, X16("vaddpd"))
K3_PAIR(vpmultishiftqb, X16("vpmultishiftqb"))  // VBMI

// Decode mixes: one row of an 8-row tile and one 32-weight group. Row A's accumulator is
// zmmA; its tables are loaded from buf (one line per row, as the kernel loads one table per
// row and group), the packed codes broadcast from buf; x is in zmm28-31; shift counts in
// zmm24/zmm23; masks k1 (words 3 of each qword), k2 (odd dwords), k3 (qwords 0-3).
//
// The avx512 set as shipped: per 16 weights vpsrlvd, vpermd, vpsllq, vpandq and 2 FMAs.
#define SHIPPED_ROW(A)                                                             \
  "vpbroadcastq " #A "*16(%0),%%zmm25\n vpbroadcastq 8+" #A                        \
  "*16(%0),%%zmm22\n"                                                              \
  "vmovdqa64 1024+" #A                                                             \
  "*64(%0),%%zmm26\n"                                                              \
  "vpsrlvd %%zmm23,%%zmm25,%%zmm16\n vpermd %%zmm26,%%zmm16,%%zmm17\n"             \
  "vpsllq $32,%%zmm17,%%zmm18\n vpandq %%zmm27,%%zmm17,%%zmm19\n"                  \
  "vfmadd231pd %%zmm18,%%zmm28,%%zmm" #A "\n vfmadd231pd %%zmm19,%%zmm29,%%zmm" #A \
  "\n"                                                                             \
  "vpsrlvd %%zmm23,%%zmm22,%%zmm20\n vpermd %%zmm26,%%zmm20,%%zmm21\n"             \
  "vpsllq $32,%%zmm21,%%zmm18\n vpandq %%zmm27,%%zmm21,%%zmm19\n"                  \
  "vfmadd231pd %%zmm18,%%zmm30,%%zmm" #A "\n vfmadd231pd %%zmm19,%%zmm31,%%zmm" #A "\n"
// The cheapest exact alternative found: a dword lookup (vpermd) and a word lookup (vpermw)
// read two fields of one index vector, so each 8 weights cost one lookup and no split. It
// pairs codes 4 apart, so it needs a different partition of the elements over the lanes and
// a second table per scale; the two 8-byte halves of the group meet in one vector by a blend.
#define TWO_LOOKUP_ROW(A)                                                                       \
  "vpbroadcastq 8+" #A "*16(%0),%%zmm25\n vpbroadcastq " #A                                     \
  "*16(%0),%%zmm22\n"                                                                           \
  "vpblendmq %%zmm22,%%zmm25,%%zmm25%{%%k3%}\n"                                                 \
  "vmovdqa64 1024+" #A "*64(%0),%%zmm26\n vmovdqa64 2048+" #A                                   \
  "*64(%0),%%zmm27\n"                                                                           \
  "vpsllvq %%zmm24,%%zmm25,%%zmm16\n vpsrlvq %%zmm23,%%zmm25,%%zmm17\n"                         \
  "vpermd %%zmm26,%%zmm16,%%zmm18%{%%k2%}%{z%}\n vpermw %%zmm27,%%zmm16,%%zmm19%{%%k1%}%{z%}\n" \
  "vpermd %%zmm26,%%zmm17,%%zmm20%{%%k2%}%{z%}\n vpermw %%zmm27,%%zmm17,%%zmm21%{%%k1%}%{z%}\n" \
  "vfmadd231pd %%zmm18,%%zmm28,%%zmm" #A "\n vfmadd231pd %%zmm19,%%zmm29,%%zmm" #A              \
  "\n"                                                                                          \
  "vfmadd231pd %%zmm20,%%zmm30,%%zmm" #A "\n vfmadd231pd %%zmm21,%%zmm31,%%zmm" #A "\n"
// The FMAs alone (8 rows x 4 dependent FMAs: bound by the FMA latency, 16 cycles).
#define FMA_ONLY_ROW(A)                                                            \
  "vfmadd231pd %%zmm18,%%zmm28,%%zmm" #A "\n vfmadd231pd %%zmm19,%%zmm29,%%zmm" #A \
  "\n"                                                                             \
  "vfmadd231pd %%zmm20,%%zmm30,%%zmm" #A "\n vfmadd231pd %%zmm21,%%zmm31,%%zmm" #A "\n"
#define TILE(ROW) ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7)
K3_BLOCK(tile_shipped, TILE(SHIPPED_ROW))
K3_BLOCK(tile_two_lookup, TILE(TWO_LOOKUP_ROW))
K3_BLOCK(tile_fma_only, TILE(FMA_ONLY_ROW))

using Block = void (*)(long, const unsigned char*);

/// Seconds per call of `f` (each call runs n iterations), best of `rounds`.
double best_seconds(Block f, long n, int rounds, const unsigned char* buf) {
  f(n / 100 + 1, buf);  // warm up the clock and the caches
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = Clock::now();
    f(n, buf);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

struct Pair {
  const char* name;
  Block alone;
  Block with_fma;
  const char* needs;  // a CPU feature beyond AVX-512F/BW, or nullptr
};

int run(int rounds) {
  alignas(64) static unsigned char buf[4096] = {};
  const long n = 2'000'000;
  const double cycle = best_seconds(add_chain, n, rounds, buf) / static_cast<double>(n) / kAddChainCycles;
  const auto cycles = [&](Block f, long iters) {
    return best_seconds(f, iters, rounds, buf) / static_cast<double>(iters) / cycle;
  };
  std::printf("clock: %.2f GHz (dependent integer adds)\n\n", 1e-9 / cycle);

  const double fma = cycles(fma16, n / 4);
  std::printf("%-16s %10s %12s %22s\n", "instruction", "per cycle", "+16 FMAs", "shares the FMA pipes?");
  std::printf("%-16s %10.2f %12s\n", "vfmadd231pd", 16 / fma, "-");
  const Pair pairs[] = {
      {"vpermd", alone_vpermd, with_fma_vpermd, nullptr},
      {"vpermw", alone_vpermw, with_fma_vpermw, nullptr},
      {"vpermi2pd", alone_vpermi2pd, with_fma_vpermi2pd, nullptr},
      {"vpsrlvd", alone_vpsrlvd, with_fma_vpsrlvd, nullptr},
      {"vpsllq imm", alone_vpsllq_imm, with_fma_vpsllq_imm, nullptr},
      {"vpandq", alone_vpandq, with_fma_vpandq, nullptr},
      {"vpunpckldq", alone_vpunpckldq, with_fma_vpunpckldq, nullptr},
      {"vpblendmq", alone_vpblendmq, with_fma_vpblendmq, nullptr},
      {"vprolvq", alone_vprolvq, with_fma_vprolvq, nullptr},
      {"vaddpd", alone_vaddpd, with_fma_vaddpd, nullptr},
      {"vpmultishiftqb", alone_vpmultishiftqb, with_fma_vpmultishiftqb, "avx512vbmi"},
  };
  for (const Pair& p : pairs) {
    if (p.needs != nullptr && !__builtin_cpu_supports("avx512vbmi")) {
      std::printf("%-16s %10s (this CPU has no %s)\n", p.name, "-", p.needs);
      continue;
    }
    const double alone = cycles(p.alone, n / 4);
    const double mixed = cycles(p.with_fma, n / 4);
    // Disjoint pipes: the pair takes max(fma, alone). Fully shared with the FMA's two
    // pipes: (16 + 16) / 2 = 16 cycles. Say which end it is nearer.
    const double disjoint = std::max(fma, alone);
    const double shared = 16.0;
    const char* verdict = mixed >= shared * 0.9 ? "yes, fully" : mixed <= disjoint * 1.15 ? "no" : "partly";
    std::printf("%-16s %10.2f %9.1f cyc %22s\n", p.name, 16 / alone, mixed, verdict);
  }

  std::printf("\nMXFP4 decode mixes, 8 rows x 32 weights in registers (no memory):\n");
  std::printf("%-34s %12s %14s %16s %10s\n", "mix", "cycles/tile", "weights/cycle", "GB/s per core", "vs shipped");
  struct Mix {
    const char* name;
    Block f;
  };
  const Mix mixes[] = {{"shipped (avx512 set)", tile_shipped},
                       {"two lookups (other partition)", tile_two_lookup},
                       {"4 FMAs only, no decode", tile_fma_only}};
  const double shipped = cycles(tile_shipped, n / 8);
  for (const Mix& m : mixes) {
    const double c = m.f == tile_shipped ? shipped : cycles(m.f, n / 8);
    const double weights_per_cycle = 256.0 / c;
    const double gbs = weights_per_cycle * (1e-9 / cycle) * 17.0 / 32.0;
    std::printf("%-34s %12.1f %14.2f %16.1f %9.2fx\n", m.name, c, weights_per_cycle, gbs, shipped / c);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
      if (rounds < 1) {
        std::fprintf(stderr, "k3bench-fp-pipes: --rounds needs a positive count, got '%s'\n", argv[i]);
        return 2;
      }
    } else if (a == "--help" || a == "-h") {
      std::printf(
          "usage: k3bench-fp-pipes [--rounds N]\n"
          "Cycles per instruction and per MXFP4 decode mix on this core (AVX-512F/BW).\n");
      return 0;
    } else {
      std::fprintf(stderr, "k3bench-fp-pipes: unknown argument '%s' (see --help)\n", a.c_str());
      return 2;
    }
  }
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw")) {
    std::fprintf(stderr, "k3bench-fp-pipes: this CPU has no AVX-512F/BW; nothing to measure\n");
    return 3;
  }
  return run(rounds);
}

#else
int main() {
  std::fprintf(stderr, "k3bench-fp-pipes: measures x86-64 AVX-512 pipes; this is not an x86-64 build\n");
  return 3;
}
#endif
