// What this machine offers a run, probed from Linux's own files (`k3host doctor`, the memory
// plan's available_memory()): the CPU's ISA extensions, the cores and what limits them (the
// affinity mask, a cgroup CPU quota), the memory and what limits it (cgroup v2 memory.max,
// the v1 memory.limit_in_bytes), a folder's read bandwidth for requests of a given size,
// how much of a set of files the page cache holds, and the OpenMP wait policy this process
// runs with. A probe reports what it could not find (0, nullopt, an empty string) and never
// guesses; none of them throws for a file that is missing.
//
// `root` is "/" on a real machine; a test points it at a folder laid out like one
// (root/proc/meminfo, root/proc/self/cgroup, root/sys/fs/cgroup/..., root/sys/devices/system/cpu/...).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace k3::machine {

// ---- CPU ----------------------------------------------------------------------------------

struct CpuFeature {
  std::string name;  ///< as /proc/cpuinfo spells it: "avx2", "avx512f", "asimd"
  bool present = false;
};

struct CpuInfo {
  std::string arch;   ///< "x86_64", "aarch64", ...
  std::string model;  ///< /proc/cpuinfo "model name" (or "CPU part" on ARM); empty if unknown
  /// The extensions the kernel sets test (plugins/kernels/*/cpu_support.cpp), in a fixed
  /// order, each as the CPU and the OS report it (x86: CPUID and the OS's register state).
  std::vector<CpuFeature> features;
};
CpuInfo probe_cpu(const std::filesystem::path& root = "/");

// ---- Cores --------------------------------------------------------------------------------

struct CoreInfo {
  unsigned logical = 0;       ///< online CPUs (sys/devices/system/cpu/online)
  unsigned physical = 0;      ///< distinct (package, core) pairs among them; 0 = unknown
  unsigned affinity = 0;      ///< CPUs in this process's affinity mask (sched_getaffinity)
  std::string affinity_list;  ///< the mask as a CPU list: "0-1"
  /// The cgroup CPU quota in CPUs (v2 cpu.max quota/period, the tightest on the path up;
  /// v1 cpu.cfs_quota_us / cpu.cfs_period_us); nullopt when there is none.
  std::optional<double> cgroup_cpus;
  std::string cgroup_source;  ///< the file the quota came from
  /// The CPUs a run's threads can really use at once: the affinity mask, lowered to the
  /// quota rounded up (at least 1).
  [[nodiscard]] unsigned usable() const;
};
CoreInfo probe_cores(const std::filesystem::path& root = "/");

/// The compute threads a run uses for the `threads` setting: the setting itself, or for 0
/// every CPU OpenMP may use (omp_get_num_procs: the affinity mask). The model and the memory
/// plan both ask here, so the plan counts the per-thread buffers the model allocates.
int compute_threads(std::int64_t setting);

/// "0-3,5,7-8" → 6 CPUs; nullopt for text that is not a CPU list.
std::optional<unsigned> count_cpu_list(const std::string& text);

// ---- Memory -------------------------------------------------------------------------------

struct MemoryInfo {
  std::uint64_t total = 0;      ///< MemTotal, bytes
  std::uint64_t available = 0;  ///< MemAvailable, bytes
  /// The tightest cgroup memory limit on our path (v2 memory.max, else v1
  /// memory.limit_in_bytes), with that cgroup's usage; nullopt when unlimited.
  std::optional<std::uint64_t> cgroup_limit;
  std::uint64_t cgroup_usage = 0;
  std::string cgroup_source;  ///< the limit's file
  /// What this process may still use: min(MemAvailable, limit - usage).
  [[nodiscard]] std::uint64_t usable() const;
  /// Where usable() comes from: "MemAvailable" or "cgroup limit <file>".
  [[nodiscard]] std::string usable_source() const;
};
MemoryInfo probe_memory(const std::filesystem::path& root = "/");

// ---- Disk ---------------------------------------------------------------------------------

struct DiskBenchOptions {
  /// Files to read (the checkpoint's shards). Empty, or not readable with O_DIRECT: a
  /// temporary file in `scratch_folder` is written and read instead.
  std::vector<std::filesystem::path> files;
  std::filesystem::path scratch_folder;
  std::uint64_t scratch_bytes = 128ull << 20;  ///< the temporary file's size (less if the disk is fuller)
  std::uint64_t request_bytes = 1ull << 20;    ///< rounded up to 4096 (O_DIRECT)
  double seconds = 3;                          ///< in all, shared equally by the depths
  std::vector<unsigned> depths{1, 8};          ///< requests in flight (one thread each)
};

struct DiskPass {
  unsigned depth = 0;
  std::uint64_t requests = 0;
  std::uint64_t bytes = 0;
  double seconds = 0;
  [[nodiscard]] double bytes_per_second() const { return seconds > 0 ? static_cast<double>(bytes) / seconds : 0; }
};

struct DiskBench {
  std::filesystem::path folder;  ///< where the bytes were (the shards' folder or the scratch folder)
  std::string filesystem;        ///< "ext4", "xfs", "tmpfs", ... ("0x…" when unknown)
  bool temporary_file = false;   ///< read a temporary file, not the given files
  bool o_direct = false;         ///< every read bypassed the page cache
  /// The given files' file system refused O_DIRECT (rather than: no files, or none as large
  /// as one request), which is why a temporary file was read.
  bool direct_refused = false;
  /// Why the given files were not read with O_DIRECT, or how the fallback reads: empty
  /// when the files were read with O_DIRECT.
  std::string note;
  std::uint64_t request_bytes = 0;
  std::uint64_t span_bytes = 0;  ///< bytes of file the random offsets were drawn from
  std::vector<DiskPass> passes;  ///< one per depth
  [[nodiscard]] double best_bytes_per_second() const;
};

/// Random request_bytes reads at 4096-aligned offsets, each depth for seconds/depths.size().
/// O_DIRECT on the given files when they allow it; otherwise on a temporary file (never
/// named in the folder once the test ends: O_TMPFILE, or unlinked), read with O_DIRECT or,
/// where the file system refuses O_DIRECT (tmpfs), buffered with every range dropped from
/// the page cache after it is read. Never drops the given files from the page cache.
/// RuntimeError naming the file when a read fails, or when neither the files nor a
/// temporary file can be read.
DiskBench bench_disk(const DiskBenchOptions& options);

/// The same test for each request size in turn (options.request_bytes is ignored), each for
/// options.seconds ÷ the number of sizes; sizes the given files cannot serve share one
/// temporary file, written once for the largest.
std::vector<DiskBench> bench_disk(const DiskBenchOptions& options, const std::vector<std::uint64_t>& request_sizes);

/// The file system type of `path` by name ("ext4", "tmpfs", "nfs", ...).
std::string filesystem_name(const std::filesystem::path& path);

// ---- Page cache ---------------------------------------------------------------------------

struct PageCacheState {
  std::size_t files = 0;       ///< files looked at
  std::uint64_t bytes = 0;     ///< their size
  std::uint64_t resident = 0;  ///< bytes of them in the page cache now (mincore)
  std::size_t unreadable = 0;  ///< files that could not be mapped (skipped)
};
/// mincore() over each file, mapped read-only (nothing is read or faulted in).
PageCacheState page_cache_state(const std::vector<std::filesystem::path>& files);

// ---- OpenMP wait policy -------------------------------------------------------------------

/// How this process's OpenMP threads wait between parallel regions. The OpenMP runtime
/// (libgomp) reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once, when it is loaded, before
/// main(): so k3host, when the user set neither, sets its choice and re-executes itself
/// once (core/cli/openmp_reexec.cpp, docs/benchmarks.md "OpenMP wait policy"). This is
/// the environment as it was when the library was loaded, i.e. what the runtime read.
struct OpenMpWaitPolicy {
  enum class Source { user, k3host, runtime_default };
  std::string wait_policy;  ///< OMP_WAIT_POLICY as given, lower case; empty = unset
  std::string spincount;    ///< GOMP_SPINCOUNT as given; empty = unset
  Source source = Source::runtime_default;
  std::string reexec_error;  ///< set when k3host's re-execution failed (source: runtime_default)
  /// "passive", "active", "spin GOMP_SPINCOUNT=N" or "default" (the runtime's own).
  [[nodiscard]] std::string effective() const;
  /// "user", "k3host" or "runtime default".
  [[nodiscard]] std::string set_by() const;
  /// One line for people: what is in effect and why.
  [[nodiscard]] std::string describe() const;
};
OpenMpWaitPolicy openmp_wait_policy();

/// k3host's choice when the user chose nothing (measured: docs/benchmarks.md).
inline constexpr const char* kOpenMpWaitPolicyChoice = "passive";
/// Set next to it, so the re-executed process knows who chose (and never re-executes again).
inline constexpr const char* kOpenMpChoiceMarker = "K3_OMP_WAIT_POLICY_CHOSEN";

/// For main(), first thing: when the user set none of OMP_WAIT_POLICY, GOMP_SPINCOUNT and
/// KMP_BLOCKTIME (and this is not already the re-executed process), sets OMP_WAIT_POLICY to
/// k3host's choice and the marker, and returns true: the caller then re-executes itself.
/// Otherwise changes nothing and returns false.
bool prepare_openmp_reexec();
/// The re-execution failed: undoes prepare_openmp_reexec() and records why, so the process
/// goes on with the runtime's default and says so (openmp_wait_policy().reexec_error).
void openmp_reexec_failed(const std::string& reason);

}  // namespace k3::machine
