// k3host make-model: writes a synthetic checkpoint in the released K3 format from a geometry
// in configs/models/ (tiny, tiny2, demo, k3) or a YAML file. Prints a summary on stdout and,
// for writes above 64 MB on a terminal, a progress line on stderr (not with -q).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include <k3/error.hpp>
#include <k3/log.hpp>
#include <k3/make_model.hpp>

#include "cli.hpp"

namespace k3::cli {
namespace {

struct MakeModelArgs {
  std::string geometry;
  std::string out;
  std::uint64_t seed = 0;
  bool force = false;
  bool headers_only = false;
  std::string dtypes;
};

// "\r123.4 / 450.0 MB (27%)  210 MB/s", at most five times a second.
class ProgressLine {
 public:
  void operator()(std::uint64_t done, std::uint64_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double mb = static_cast<double>(done) / 1e6;
    std::fprintf(stderr, "\rmake-model: %.1f / %.1f MB (%3.0f%%)  %.0f MB/s   ", mb, static_cast<double>(total) / 1e6,
                 total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0,
                 secs > 0 ? mb / secs : 0.0);
    if (done >= total) std::fprintf(stderr, "\n");
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace

Command register_make_model(CLI::App& app, GlobalOptions& /*global*/) {
  auto args = std::make_shared<MakeModelArgs>();
  auto* sub = app.add_subcommand("make-model",
                                 "Write a synthetic checkpoint in the released K3 format (config.json, safetensors "
                                 "shards, index, tokenizer) from a geometry in configs/models/");
  sub->add_option("--geometry,-g", args->geometry, "Geometry name (tiny, tiny2, demo, k3) or a YAML file")->required();
  sub->add_option("--out,-o", args->out, "Target directory (written atomically)")->required();
  auto* seed = sub->add_option("--seed", args->seed, "Weight seed (default: the geometry's writer.seed)");
  sub->add_flag("--force", args->force, "Replace an existing non-empty target directory");
  sub->add_option("--dtypes", args->dtypes,
                  "Dtype mix of the tensors that are not routed experts: release (F32 where the release stores "
                  "F32), compact (BF16 wherever accepted) or f32 (F32 wherever accepted, matrices too); default: "
                  "the geometry's writer.dtypes")
      ->check(CLI::IsMember({"release", "compact", "f32"}));
  sub->add_flag("--headers-only", args->headers_only,
                "Real headers over sparse files (no data, no disk use): the full k3 layout for index benchmarks");
  sub->footer(
      "OUT is written as a temporary folder and renamed when complete: Ctrl-C ends it at once and leaves no "
      "OUT (the next write of OUT removes the temporary). Exit codes: 0 ok, 1 runtime failure, 2 a usage "
      "error, an unknown geometry or an OUT it may not replace.");
  return {sub, [args, seed]() {
            const ModelGeometry g = load_geometry(args->geometry);
            MakeModelOptions o;
            o.out = args->out;
            if (seed->count() > 0) o.seed = args->seed;
            o.force = args->force;
            o.headers_only = args->headers_only;
            if (!args->dtypes.empty()) o.dtypes = parse_dtype_mix(args->dtypes, "--dtypes");
            const auto census = geometry_census(g.config, o.dtypes.value_or(g.writer.dtypes));
            ProgressLine line;
            if (census.bytes >= (64ull << 20) && ::isatty(STDERR_FILENO) && log_enabled(LogLevel::info))
              o.progress = [&line](std::uint64_t done, std::uint64_t total) { line(done, total); };
            const MakeModelResult r = make_model(g, o);
            std::printf("make-model: %s -> %s\n", g.name.c_str(), r.dir.c_str());
            std::printf("  %llu tensors in %llu shards, %.1f MB of tensor data%s, seed %llu, %s dtypes\n",
                        static_cast<unsigned long long>(r.tensors), static_cast<unsigned long long>(r.shards),
                        static_cast<double>(r.tensor_bytes) / 1e6, o.headers_only ? " (sparse: headers only)" : "",
                        static_cast<unsigned long long>(r.seed), to_string(r.dtypes));
            std::printf("  %.2f M parameters (%.2f M in %lld experts x %lld MoE layers), vocab %lld\n",
                        static_cast<double>(census.params) / 1e6, static_cast<double>(census.expert_params) / 1e6,
                        static_cast<long long>(g.config.num_experts),
                        static_cast<long long>(g.config.num_hidden_layers - g.config.first_k_dense_replace),
                        static_cast<long long>(g.config.vocab_size));
            std::printf("  written in %.2f s\n", r.seconds);
            return 0;
          }};
}

}  // namespace k3::cli
