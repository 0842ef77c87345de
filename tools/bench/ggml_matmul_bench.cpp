// k3bench-ggml: one matmul with a batch of N positions against N batch-1 matmuls, for a k3
// kernel set and for ggml's own CPU matmul (ggml_mul_mat, one thread), at the K3 shapes, in
// the same run (alternating k3 and ggml each round), so the two can be compared on one noisy
// machine. Built only when K3_GGML_DIR names an out-of-tree ggml install (tools/bench/
// CMakeLists.txt); never part of the default build or CI.
//
// The two do different arithmetic, which the numbers must be read with: k3 keeps the
// contract (fp32 activations widened to fp64, exact products, fp64 sums in a fixed tree);
// ggml rounds the activations to the weight's dot type (bf16 for bf16 weights, 8-bit Q8_0
// for MXFP4) and sums in fp32 or int32. Weights are the same random values in each format
// (ggml's MXFP4 comes from its own quantizer, k3's from random codes and scales; both are
// 4.25 bits per weight). Weights cycle through copies (>= --working-set MiB) on both sides,
// so they come from memory, as when a model streams them.
//
// Which ggml ran matters as much as the figures, so the output opens with it: ggml's commit
// and version, whether its CPU backend was built with LLAMAFILE (tinyBLAS sgemm, which
// serves bf16 and fp32 batches of 2 and more) and with CPU_REPACK, and the CPU features it
// was compiled for. --ggml-weights repack puts ggml's weights in the CPU_REPACK buffer type,
// as llama.cpp does, where ggml has a repacked layout for the type on this CPU (the last
// column says which layout each row ran); plain keeps them in ggml's ordinary layout.
//
//   k3bench-ggml [--set avx2] [--kernels bf16,mxfp4,f32] [--positions 8] [--rounds 3]
//                [--min-time 0.3] [--working-set 256] [--ggml-weights plain|repack]
#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml-cpu.h>
#include <ggml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <k3/plugin_host.hpp>

namespace {

struct Options {
  std::string set = "avx2";
  std::vector<std::string> kernels{"bf16", "mxfp4", "f32"};
  std::size_t positions = 8;
  int rounds = 3;
  double min_time = 0.3;
  std::size_t working_set_mib = 256;
  bool ggml_repack = false;  // --ggml-weights repack
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
          "k3bench-ggml [--set avx2] [--kernels bf16,mxfp4,f32] [--positions 8] [--rounds 3]\n"
          "             [--min-time 0.3] [--working-set 256] [--ggml-weights plain|repack]");
      std::exit(0);
    }
    if (i + 1 >= argc) throw std::invalid_argument(arg + ": missing value");
    const std::string v = argv[++i];
    if (arg == "--set")
      o.set = v;
    else if (arg == "--kernels")
      o.kernels = split(v);
    else if (arg == "--positions")
      o.positions = std::stoul(v);
    else if (arg == "--rounds")
      o.rounds = std::stoi(v);
    else if (arg == "--min-time")
      o.min_time = std::stod(v);
    else if (arg == "--working-set")
      o.working_set_mib = std::stoul(v);
    else if (arg == "--ggml-weights" && (v == "plain" || v == "repack"))
      o.ggml_repack = v == "repack";
    else if (arg == "--ggml-weights")
      throw std::invalid_argument("--ggml-weights: " + v + " is not plain or repack");
    else
      throw std::invalid_argument("unknown option " + arg);
  }
  if (o.positions == 0) throw std::invalid_argument("--positions must be at least 1");
  return o;
}

/// splitmix64, as in kernels_bench.cpp.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

/// Moderate fp32 values (|v| in [2^-8, 2^8)) with random signs.
float moderate(Rng& r) {
  const std::uint64_t u = r.next();
  const auto bits = static_cast<std::uint32_t>((u & 0x807FFFFFu) | ((119u + (u >> 40) % 16u) << 23));
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// CPU seconds per call of body(copy), cycling the copies until min_time CPU seconds passed.
template <class Body>
double seconds_per_call(double min_time, std::size_t copies, Body&& body) {
  body(0);
  std::size_t calls = 0;
  const double start = cpu_seconds();
  double elapsed = 0;
  do {
    body(calls % copies);
    ++calls;
    elapsed = cpu_seconds() - start;
  } while (elapsed < min_time);
  return elapsed / static_cast<double>(calls);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 != 0 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

std::size_t weight_bytes(const std::string& kernel, const Shape& s) {
  if (kernel == "bf16") return s.rows * s.cols * 2;
  if (kernel == "f32") return s.rows * s.cols * 4;
  return s.rows * ((s.cols + 1) / 2 + (s.cols + 31) / 32);
}

/// `copies` copies of one random matrix in k3's layout for `kernel`, and its fp32 values
/// (for ggml's conversion / quantizer).
struct K3Weights {
  std::vector<std::uint16_t> bf16;
  std::vector<float> f32;
  std::vector<std::uint8_t> packed;
  std::vector<std::uint8_t> scales;
};

K3Weights k3_weights(const std::string& kernel, const Shape& s, const std::vector<float>& values, std::size_t copies) {
  K3Weights w;
  const std::size_t n = s.rows * s.cols;
  if (kernel == "bf16") {
    w.bf16.resize(n * copies);
    for (std::size_t i = 0; i < n * copies; ++i) {
      std::uint32_t b;
      std::memcpy(&b, &values[i % n], sizeof b);
      w.bf16[i] = static_cast<std::uint16_t>(b >> 16);
    }
  } else if (kernel == "f32") {
    w.f32.resize(n * copies);
    for (std::size_t i = 0; i < n * copies; ++i) w.f32[i] = values[i % n];
  } else {
    Rng rng{42};
    const std::size_t pbytes = s.rows * ((s.cols + 1) / 2);
    const std::size_t sbytes = s.rows * ((s.cols + 31) / 32);
    w.packed.resize(pbytes * copies);
    w.scales.resize(sbytes * copies);
    for (auto& b : w.packed) b = static_cast<std::uint8_t>(rng.next());
    for (auto& b : w.scales) b = static_cast<std::uint8_t>(112 + rng.next() % 16);
  }
  return w;
}

void k3_call(const k3::sdk::KernelSet& set, const std::string& kernel, const Shape& s, const K3Weights& w,
             std::size_t copy, const float* x, std::size_t batch, float* y) {
  const std::size_t n = s.rows * s.cols;
  const k3::sdk::RowRange all{0, s.rows};
  if (kernel == "bf16") {
    set.matmul_bf16(w.bf16.data() + copy * n, s.rows, s.cols, all, x, batch, y);
  } else if (kernel == "f32") {
    set.matmul_f32(w.f32.data() + copy * n, s.rows, s.cols, all, x, batch, y);
  } else {
    const std::size_t pbytes = s.rows * ((s.cols + 1) / 2);
    const std::size_t sbytes = s.rows * ((s.cols + 31) / 32);
    set.matmul_mxfp4({w.packed.data() + copy * pbytes, w.scales.data() + copy * sbytes, s.rows, s.cols}, all, x, batch,
                     y);
  }
}

/// ggml's CPU device and its CPU_REPACK buffer type (nullptr when ggml was built without it).
struct GgmlCpu {
  ggml_backend_reg_t reg = ggml_backend_cpu_reg();
  ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, 0);
  ggml_backend_buffer_type_t repack = nullptr;
  GgmlCpu() {
    auto* extra = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts"));
    if (extra == nullptr) return;
    for (ggml_backend_buffer_type_t* b = extra(dev); *b != nullptr; ++b)
      if (std::strcmp(ggml_backend_buft_name(*b), "CPU_REPACK") == 0) repack = *b;
  }
  /// ggml's own build flag (LLAMAFILE, REPACK, ...) as its CPU backend reports it.
  [[nodiscard]] bool feature(const char* name) const {
    auto* features = reinterpret_cast<ggml_backend_get_features_t>(
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features"));
    if (features == nullptr) return false;
    for (ggml_backend_feature* f = features(reg); f->name != nullptr; ++f)
      if (std::strcmp(f->name, name) == 0) return std::strcmp(f->value, "0") != 0;
    return false;
  }
  /// Whether ggml would run a mul_mat of this weight type and shape from a CPU_REPACK weight
  /// (asked as llama.cpp asks before it places a weight there: a zero-size buffer of the type).
  [[nodiscard]] bool repacks(ggml_type type, std::int64_t cols, std::int64_t rows, std::int64_t positions) const {
    if (repack == nullptr) return false;
    ggml_init_params params{4 * ggml_tensor_overhead(), nullptr, true};
    ggml_context* ctx = ggml_init(params);
    if (ctx == nullptr) throw std::runtime_error("ggml_init failed");
    ggml_tensor* w = ggml_new_tensor_2d(ctx, type, cols, rows);
    ggml_tensor* x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, cols, positions);
    ggml_tensor* op = ggml_mul_mat(ctx, w, x);
    ggml_backend_buffer_t dummy = ggml_backend_buft_alloc_buffer(repack, 0);
    w->buffer = dummy;
    const bool ok = ggml_backend_dev_supports_op(dev, op);
    ggml_backend_buffer_free(dummy);
    ggml_free(ctx);
    return ok;
  }
};

/// ggml's side: per weight copy, a graph with one mul_mat of all N positions and a graph of
/// N mul_mats of one position each (views of the same activations). The weights live in a
/// backend buffer of `buft` (ggml's plain CPU buffer or CPU_REPACK, which repacks them as they
/// are set); the activations, results and graphs in an ordinary ggml context.
class GgmlSide {
 public:
  GgmlSide(const std::string& kernel, const Shape& s, const std::vector<float>& values, std::size_t copies,
           const std::vector<float>& x, std::size_t positions, ggml_backend_buffer_type_t buft) {
    const ggml_type type = kernel == "bf16" ? GGML_TYPE_BF16 : kernel == "f32" ? GGML_TYPE_F32 : GGML_TYPE_MXFP4;
    const auto rows = static_cast<std::int64_t>(s.rows);
    const auto cols = static_cast<std::int64_t>(s.cols);
    weights_ctx_ = ggml_init({copies * ggml_tensor_overhead() + 1024, nullptr, true});
    if (weights_ctx_ == nullptr) throw std::runtime_error("ggml_init failed");
    std::vector<ggml_tensor*> ws;
    for (std::size_t c = 0; c < copies; ++c) ws.push_back(ggml_new_tensor_2d(weights_ctx_, type, cols, rows));
    weights_ = ggml_backend_alloc_ctx_tensors_from_buft(weights_ctx_, buft);
    if (weights_ == nullptr) throw std::runtime_error("ggml could not allocate the weights");
    std::vector<std::uint8_t> staged(ggml_row_size(type, cols) * s.rows);
    if (type == GGML_TYPE_BF16)
      ggml_fp32_to_bf16_row(values.data(), reinterpret_cast<ggml_bf16_t*>(staged.data()), rows * cols);
    else if (type == GGML_TYPE_F32)
      std::memcpy(staged.data(), values.data(), values.size() * 4);
    else
      ggml_quantize_chunk(type, values.data(), staged.data(), 0, rows, cols, nullptr);
    for (ggml_tensor* w : ws) ggml_backend_tensor_set(w, staged.data(), 0, staged.size());
    reference(type, staged, s, x, positions);

    const std::size_t graph_size = 2 * positions + 8;
    const std::size_t mem = copies * (2 * ggml_graph_overhead_custom(graph_size, false) +
                                      (2 * positions + 2) * ggml_tensor_overhead() + 2 * positions * s.rows * 4) +
                            x.size() * 4 + ggml_tensor_overhead() + (std::size_t{16} << 20);
    ctx_ = ggml_init({mem, nullptr, false});
    if (ctx_ == nullptr) throw std::runtime_error("ggml_init failed");
    ggml_tensor* xt = ggml_new_tensor_2d(ctx_, GGML_TYPE_F32, cols, static_cast<std::int64_t>(positions));
    std::memcpy(xt->data, x.data(), x.size() * 4);
    for (ggml_tensor* w : ws) {
      ggml_cgraph* batched = ggml_new_graph_custom(ctx_, graph_size, false);
      ggml_tensor* all = ggml_mul_mat(ctx_, w, xt);
      ggml_build_forward_expand(batched, all);
      ggml_cgraph* singles = ggml_new_graph_custom(ctx_, graph_size, false);
      for (std::size_t p = 0; p < positions; ++p) {
        ggml_tensor* xp = ggml_view_2d(ctx_, xt, cols, 1, xt->nb[1], p * xt->nb[1]);
        ggml_tensor* one = ggml_mul_mat(ctx_, w, xp);
        ggml_build_forward_expand(singles, one);
        if (w == ws.front()) single_outputs_.push_back(one);
      }
      if (w == ws.front()) batched_output_ = all;
      batched_.push_back(batched);
      singles_.push_back(singles);
    }
  }
  ~GgmlSide() {
    ggml_free(ctx_);
    ggml_backend_buffer_free(weights_);
    ggml_free(weights_ctx_);
  }
  GgmlSide(const GgmlSide&) = delete;
  GgmlSide& operator=(const GgmlSide&) = delete;

  void run_batched(std::size_t copy) { compute(batched_[copy]); }
  void run_singles(std::size_t copy) { compute(singles_[copy]); }

  /// Runs both graphs of the first copy and throws unless every output is within 2% of the
  /// sum of |w·x| of the fp64 product of ggml's own weights (as stored before any repacking)
  /// and the activations: ggml rounds activations to bf16 or Q8_0 and sums in fp32, which
  /// stays far inside that; a wrong layout or a skipped kernel does not.
  void check(const char* what) {
    run_batched(0);
    run_singles(0);
    const std::size_t rows = reference_.size() / single_outputs_.size();
    for (std::size_t p = 0; p < single_outputs_.size(); ++p) {
      const auto* all = static_cast<const float*>(batched_output_->data) + p * rows;
      const auto* one = static_cast<const float*>(single_outputs_[p]->data);
      for (std::size_t r = 0; r < rows; ++r) {
        const double want = reference_[p * rows + r], scale = magnitude_[p * rows + r];
        if (!(std::abs(all[r] - want) <= 0.02 * scale && std::abs(one[r] - want) <= 0.02 * scale))
          throw std::runtime_error(std::string("ggml's ") + what + " result disagrees with its own weights at row " +
                                   std::to_string(r) + ", position " + std::to_string(p));
      }
    }
  }

 private:
  /// The fp64 product of the weights ggml was given (`staged`, before repacking) and the
  /// activations, and the sum of |w·x| of each output.
  void reference(ggml_type type, const std::vector<std::uint8_t>& staged, const Shape& s, const std::vector<float>& x,
                 std::size_t positions) {
    const ggml_type_traits* traits = ggml_get_type_traits(type);
    std::vector<float> row(s.cols);
    reference_.assign(s.rows * positions, 0.0);
    magnitude_.assign(s.rows * positions, 0.0);
    const std::size_t row_bytes = ggml_row_size(type, static_cast<std::int64_t>(s.cols));
    for (std::size_t r = 0; r < s.rows; ++r) {
      if (type == GGML_TYPE_F32)
        std::memcpy(row.data(), staged.data() + r * row_bytes, row_bytes);
      else
        traits->to_float(staged.data() + r * row_bytes, row.data(), static_cast<std::int64_t>(s.cols));
      for (std::size_t p = 0; p < positions; ++p) {
        double sum = 0, mag = 0;
        for (std::size_t c = 0; c < s.cols; ++c) {
          const double prod = static_cast<double>(row[c]) * static_cast<double>(x[p * s.cols + c]);
          sum += prod;
          mag += std::abs(prod);
        }
        reference_[p * s.rows + r] = sum;
        magnitude_[p * s.rows + r] = mag;
      }
    }
  }

  void compute(ggml_cgraph* g) {
    ggml_cplan plan = ggml_graph_plan(g, 1, nullptr);
    if (work_.size() < plan.work_size) work_.resize(plan.work_size);
    plan.work_data = work_.data();
    if (ggml_graph_compute(g, &plan) != GGML_STATUS_SUCCESS) throw std::runtime_error("ggml_graph_compute failed");
  }

  ggml_context* weights_ctx_ = nullptr;
  ggml_backend_buffer_t weights_ = nullptr;
  ggml_context* ctx_ = nullptr;
  std::vector<ggml_cgraph*> batched_;
  std::vector<ggml_cgraph*> singles_;
  std::vector<std::uint8_t> work_;
  ggml_tensor* batched_output_ = nullptr;
  std::vector<ggml_tensor*> single_outputs_;
  std::vector<double> reference_;  // [position][row]
  std::vector<double> magnitude_;
};

/// ggml's warnings and errors to stderr; its debug and info lines (one per repacked tensor)
/// dropped. A continued line follows its first line's level.
void ggml_log(ggml_log_level level, const char* text, void* /*user*/) {
  static bool shown = false;
  if (level != GGML_LOG_LEVEL_CONT) shown = level >= GGML_LOG_LEVEL_WARN;
  if (shown) std::fputs(text, stderr);
}

/// One line naming the ggml this run is against, before the table.
void print_ggml_build(const GgmlCpu& cpu, bool repack_asked) {
  std::printf(
      "ggml %s (commit %s): LLAMAFILE %s, CPU_REPACK %s, compiled for AVX2 %s, AVX-512 %s, AVX512_BF16 %s; "
      "ggml weights: %s\n\n",
      ggml_version(), ggml_commit(), cpu.feature("LLAMAFILE") ? "on" : "off", cpu.repack != nullptr ? "on" : "off",
      ggml_cpu_has_avx2() != 0 ? "yes" : "no", ggml_cpu_has_avx512() != 0 ? "yes" : "no",
      ggml_cpu_has_avx512_bf16() != 0 ? "yes" : "no",
      repack_asked ? "CPU_REPACK where ggml repacks the type on this CPU, else plain" : "plain");
}

}  // namespace

int main(int argc, char** argv) try {
  const Options opt = parse(argc, argv);
  ggml_log_set(ggml_log, nullptr);
  ggml_cpu_init();
  const GgmlCpu ggml_cpu;
  if (opt.ggml_repack && ggml_cpu.repack == nullptr)
    throw std::invalid_argument("--ggml-weights repack: this ggml was built without GGML_CPU_REPACK");
  print_ggml_build(ggml_cpu, opt.ggml_repack);
  k3::PluginHost host;
  const auto set = host.create_kernels(opt.set, {});
  const std::size_t n = opt.positions;
  const Shape shapes[] = {{"7168x3072", 7168, 3072}, {"3072x7168", 3072, 7168}};
  std::printf(
      "| kernel | shape (rows x cols) | k3 %s: 1 call, batch %zu (ms) | k3: %zu calls, batch 1 (ms) | k3 ratio | ggml: "
      "1 "
      "call, batch %zu (ms) | ggml: %zu calls, batch 1 (ms) | ggml ratio | k3 / ggml, batch %zu | ggml weights |\n",
      opt.set.c_str(), n, n, n, n, n);
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& kernel : opt.kernels) {
    if (kernel != "bf16" && kernel != "f32" && kernel != "mxfp4")
      throw std::invalid_argument("unknown kernel " + kernel);
    for (const Shape& s : shapes) {
      const std::size_t bytes = weight_bytes(kernel, s);
      const std::size_t copies = std::max<std::size_t>(1, (opt.working_set_mib * 1024 * 1024 + bytes - 1) / bytes);
      Rng rng{7};
      std::vector<float> values(s.rows * s.cols);
      for (auto& v : values) v = moderate(rng);
      std::vector<float> x(n * s.cols);
      for (auto& v : x) v = moderate(rng);
      std::vector<float> y(n * s.rows);
      const K3Weights kw = k3_weights(kernel, s, values, copies);
      const ggml_type type = kernel == "bf16" ? GGML_TYPE_BF16 : kernel == "f32" ? GGML_TYPE_F32 : GGML_TYPE_MXFP4;
      const auto rows = static_cast<std::int64_t>(s.rows), cols = static_cast<std::int64_t>(s.cols);
      const bool repacked = opt.ggml_repack && ggml_cpu.repacks(type, cols, rows, static_cast<std::int64_t>(n)) &&
                            ggml_cpu.repacks(type, cols, rows, 1);
      GgmlSide gg(kernel, s, values, copies, x, n, repacked ? ggml_cpu.repack : ggml_backend_cpu_buffer_type());
      gg.check(kernel.c_str());
      std::vector<double> k3_b, k3_1, gg_b, gg_1;
      for (int round = 0; round < opt.rounds; ++round) {
        k3_b.push_back(seconds_per_call(opt.min_time, copies, [&](std::size_t c) {
          k3_call(*set, kernel, s, kw, c, x.data(), n, y.data());
        }));
        k3_1.push_back(seconds_per_call(opt.min_time, copies, [&](std::size_t c) {
          for (std::size_t p = 0; p < n; ++p)
            k3_call(*set, kernel, s, kw, c, x.data() + p * s.cols, 1, y.data() + p * s.rows);
        }));
        gg_b.push_back(seconds_per_call(opt.min_time, copies, [&](std::size_t c) { gg.run_batched(c); }));
        gg_1.push_back(seconds_per_call(opt.min_time, copies, [&](std::size_t c) { gg.run_singles(c); }));
      }
      const double kb = median(k3_b), k1 = median(k3_1), gb = median(gg_b), g1 = median(gg_1);
      std::printf("| %s | %s | %.2f | %.2f | %.3f | %.2f | %.2f | %.3f | %.2f | %s |\n", kernel.c_str(), s.name,
                  1e3 * kb, 1e3 * k1, kb / k1, 1e3 * gb, 1e3 * g1, gb / g1, kb / gb, repacked ? "CPU_REPACK" : "plain");
      std::fflush(stdout);
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "k3bench-ggml: %s\n", e.what());
  return 2;
}
