// k3host pack-trunk [--codec none|bf16-zstd|bf16-huff] [--layers A-B] MODEL OUT: writes
// every layer's (or layers A..B's) non-expert tensors as one 4096-aligned run in
// OUT/trunk.bin (coded with a codec) plus OUT/trunk.json (see k3/packed_trunk.hpp), with a
// progress line on stderr (not with -q), verification by read-back, and an atomic rename
// into place.
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <k3/error.hpp>
#include <k3/log.hpp>
#include <k3/pack_trunk.hpp>

#include "cli.hpp"

namespace k3::cli {
namespace {

struct PackTrunkArgs {
  std::string model;
  std::string out;
  std::string storage = "posix";
  std::string codec = "none";
  std::string layers;  ///< "A-B" or "A"; empty: the whole trunk
  bool force = false;
};

/// "A-B" (or "A": one layer) as a range; UsageError naming --layers otherwise (the range is
/// checked against the checkpoint by pack_trunk).
TrunkLayerRange parse_layers(const std::string& text) {
  const auto number = [&](std::string_view part, std::int64_t& out) {
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
    return !part.empty() && ec == std::errc() && end == part.data() + part.size() && out >= 0;
  };
  const std::string_view t(text);
  const std::size_t dash = t.find('-');
  TrunkLayerRange r;
  bool ok = false;
  if (dash == std::string_view::npos) {
    ok = number(t, r.first);
    r.last = r.first;
  } else {
    ok = number(t.substr(0, dash), r.first) && number(t.substr(dash + 1), r.last);
  }
  if (!ok) throw UsageError("--layers '" + text + "': expected a range of layers A-B (or one layer A), e.g. 3-6");
  if (r.last < r.first)
    throw UsageError("--layers " + text + ": the range is empty (its last layer is below its first)");
  return r;
}

// "\rpack-trunk copy: 123.4 / 450.0 MB (27%)  210 MB/s", at most five times a second on a
// terminal; elsewhere one line per phase when it ends.
class Progress {
 public:
  void operator()(std::string_view phase, std::uint64_t done, std::uint64_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (phase != phase_) {
      phase_ = std::string(phase);
      start_ = now;
    }
    const bool finished = done >= total;
    if (!finished && (!tty_ || now - last_ < std::chrono::milliseconds(200))) return;
    last_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double mb = static_cast<double>(done) / 1e6;
    std::fprintf(stderr, "%spack-trunk %s: %.1f / %.1f MB (%3.0f%%)  %.0f MB/s   %s", tty_ ? "\r" : "", phase_.c_str(),
                 mb, static_cast<double>(total) / 1e6,
                 total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0,
                 secs > 0 ? mb / secs : 0.0, finished ? "\n" : "");
  }

 private:
  bool tty_ = ::isatty(STDERR_FILENO) != 0;
  std::string phase_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace

Command register_pack_trunk(CLI::App& app, GlobalOptions& /*global*/) {
  auto args = std::make_shared<PackTrunkArgs>();
  auto* sub = app.add_subcommand("pack-trunk",
                                 "Pack every layer's non-expert tensors into one 4096-aligned run each "
                                 "(OUT/trunk.bin + OUT/trunk.json), verified and written atomically");
  sub->add_option("model", args->model, "Checkpoint directory")->required();
  sub->add_option("out", args->out, "Target directory (must not exist unless --force)")->required();
  sub->add_option("--storage", args->storage, "Storage plugin reading the checkpoint (default posix)");
  sub->add_flag("--force", args->force, "Replace an existing OUT");
  sub->add_option("--layers", args->layers,
                  "Pack only layers A-B (inclusive; or one layer A), e.g. --layers 3-6: a run reads those from OUT "
                  "and the other layers and the embedding, final norm and lm_head from the checkpoint's shards. "
                  "trunk.json records the range. Default: the whole trunk");
  std::string codecs;
  for (const auto& n : trunk_codec_names()) codecs += (codecs.empty() ? "" : ", ") + n;
  sub->add_option("--codec", args->codec,
                  "How layer runs are stored (" + codecs +
                      "). none (default): raw runs, trunk.json version 1. bf16-zstd and bf16-huff: exact; "
                      "each BF16 tensor of a layer run in 256 KiB blocks with its exponent bytes coded (by zstd, "
                      "or by k3host's own Huffman coder: smaller and faster to decode), decoded by the thread "
                      "that reads it; layer runs shrink to ~0.66-0.69 of their bytes on demo, fortune and "
                      "Gaussian weights, and decoding costs ~0.4 (huff) to ~0.6 (zstd) s of one core per GB. "
                      "The embedding, lm_head and final norm stay raw. See docs/streaming.md")
      ->check(CLI::IsMember(trunk_codec_names()));
  sub->footer(
      "OUT is written under a temporary name and renamed when complete: Ctrl-C ends it at once and leaves no "
      "OUT (the next write of OUT removes the temporary). Exit codes: 0 ok, 1 runtime failure, 2 a usage "
      "error, a damaged checkpoint or an OUT it may not replace.");
  return {sub, [args]() {
            Progress progress;
            PackTrunkOptions o;
            o.model = args->model;
            o.out = args->out;
            o.force = args->force;
            o.storage = args->storage;
            o.codec = args->codec;
            if (!args->layers.empty()) o.layers = parse_layers(args->layers);
            if (log_enabled(LogLevel::info))
              o.progress = [&progress](std::string_view phase, std::uint64_t done, std::uint64_t total) {
                progress(phase, done, total);
              };
            const PackTrunkResult r = pack_trunk(o);
            std::printf("pack-trunk: %s -> %s\n", args->model.c_str(), r.dir.c_str());
            std::printf(
                "  %llu runs (%llu tensors, %llu row checksums), %.1f MB of tensor data, trunk.bin %.1f MB, "
                "checkpoint identity %s\n",
                static_cast<unsigned long long>(r.runs), static_cast<unsigned long long>(r.tensors),
                static_cast<unsigned long long>(r.row_sums), static_cast<double>(r.data_bytes) / 1e6,
                static_cast<double>(r.bin_bytes) / 1e6, identity_hex(r.identity).c_str());
            if (o.layers)
              std::printf("  layers %lld-%lld only: the other layers and the global tensors stay in the shards\n",
                          static_cast<long long>(o.layers->first), static_cast<long long>(o.layers->last));
            if (args->codec != "none")
              std::printf("  codec %s: %.1f MB stored for %.1f MB (ratio %.4f)\n", args->codec.c_str(),
                          static_cast<double>(r.stored_bytes) / 1e6, static_cast<double>(r.data_bytes) / 1e6,
                          r.data_bytes ? static_cast<double>(r.stored_bytes) / static_cast<double>(r.data_bytes) : 1.0);
            return 0;
          }};
}

}  // namespace k3::cli
