// k3host sim: replays an expert trace through cache policies at several capacities, or
// generates a synthetic trace for study (docs/cache.md).
//
//   k3host sim TRACE [--policy lru,s3fifo,belady] [--capacity 455,64GB,2x] [--param lfu.halve_every=5000]
//                    [--expert-bytes N] [--bandwidth GBPS] [--csv F] [--json F] [--svg F] [--png F]
//   k3host sim --generate-trace OUT [--trace-preset configs/traces/k3-calibrated.yaml]
//              [--layers N] [--experts M] [--top-k K] [--tokens T] [--zipf S] [--reuse P] [--seed X]
//              [--recompute-prompt P] [--expert-bytes N]
//
// Without --policy every cache plugin on the search path is simulated (K3_PLUGIN_PATH adds
// out-of-tree ones). Capacities: slots (3647), decimal GB of experts (64GB) or multiples of
// one token's working set (2x). The table goes to stdout; files are written under a
// temporary name and renamed. --png needs rsvg-convert or ImageMagick's convert on PATH and
// is refused (exit 2, before simulating) when neither is there.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <k3/error.hpp>
#include <k3/plugin_host.hpp>
#include <k3/sim.hpp>
#include <k3/trace.hpp>
#include <k3/user_files.hpp>

#include "cli.hpp"

extern char** environ;

namespace k3::cli {

namespace {

struct SimOptions {
  std::string trace;
  std::vector<std::string> policies;
  std::vector<std::string> capacities;
  std::vector<std::string> params;
  std::uint64_t expert_bytes = 0;
  double bandwidth = 3.2;
  std::string csv, json, svg, png;
  // generator
  std::string generate;
  std::string preset;
  TraceGenSettings gen;
};

std::vector<std::string> split_commas(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const std::string& item : items) {
    std::stringstream ss(item);
    std::string part;
    while (std::getline(ss, part, ','))
      if (!part.empty()) out.push_back(part);
  }
  return out;
}

std::optional<std::filesystem::path> find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return std::nullopt;
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    const std::filesystem::path p = std::filesystem::path(dir) / program;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return std::nullopt;
}

// The first SVG -> PNG converter found: rsvg-convert, then ImageMagick's convert.
std::optional<std::vector<std::string>> png_converter() {
  if (const auto p = find_on_path("rsvg-convert")) return std::vector<std::string>{p->string(), "-o", "{out}", "{in}"};
  if (const auto p = find_on_path("convert")) return std::vector<std::string>{p->string(), "{in}", "{out}"};
  return std::nullopt;
}

void run_converter(std::vector<std::string> argv, const std::string& in, const std::string& out) {
  for (std::string& a : argv) {
    if (a == "{in}") a = in;
    if (a == "{out}") a = out;
  }
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  if (::posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0)
    throw RuntimeError(argv[0] + ": cannot start the PNG converter");
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw RuntimeError(argv[0] + ": converting " + in + " to PNG failed (exit status " +
                       std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
}

std::vector<SimPolicy> chosen_policies(const SimOptions& o, PluginHost& host) {
  std::vector<SimPolicy> out;
  const auto names = split_commas(o.policies);
  if (names.empty()) {
    for (const PluginInfo& p : host.plugins())
      if (p.kind == PluginKind::cache) out.push_back({p.name, {}});
    if (out.empty()) throw UsageError("sim: no cache plugin on the search path");
    // Alphabetical, belady last: the ceiling closes every table.
    std::sort(out.begin(), out.end(), [](const SimPolicy& a, const SimPolicy& b) {
      return (a.name == "belady") != (b.name == "belady") ? b.name == "belady" : a.name < b.name;
    });
  } else {
    for (const std::string& n : names) out.push_back({n, {}});
  }
  for (const std::string& p : o.params) {
    const auto dot = p.find('.');
    const auto eq = p.find('=');
    if (dot == std::string::npos || eq == std::string::npos || eq < dot || dot == 0)
      throw UsageError("--param '" + p + "': expected POLICY.KEY=VALUE (e.g. lfu.halve_every=5000)");
    const std::string policy = p.substr(0, dot);
    auto it = std::find_if(out.begin(), out.end(), [&](const SimPolicy& s) { return s.name == policy; });
    if (it == out.end()) throw UsageError("--param '" + p + "': policy '" + policy + "' is not simulated");
    it->params.emplace_back(p.substr(dot + 1, eq - dot - 1), p.substr(eq + 1));
  }
  return out;
}

int generate(SimOptions& o, const CLI::App& sub) {
  if (!o.trace.empty()) throw UsageError("sim: give either a TRACE to replay or --generate-trace OUT, not both");
  TraceGenSettings g;
  if (!o.preset.empty()) g = load_trace_preset(o.preset, g);
  // Options given on the command line override the preset.
  if (sub.count("--layers") != 0) g.layers = o.gen.layers;
  if (sub.count("--experts") != 0) g.experts = o.gen.experts;
  if (sub.count("--top-k") != 0) g.top_k = o.gen.top_k;
  if (sub.count("--tokens") != 0) g.tokens = o.gen.tokens;
  if (sub.count("--zipf") != 0) g.zipf = o.gen.zipf;
  if (sub.count("--reuse") != 0) g.reuse = o.gen.reuse;
  if (sub.count("--seed") != 0) g.seed = o.gen.seed;
  if (sub.count("--recompute-prompt") != 0) g.recompute_prompt = o.gen.recompute_prompt;
  if (sub.count("--expert-bytes") != 0) g.expert_bytes = o.expert_bytes;
  check_output_file(o.generate, "--generate-trace");  // before the work, not after it
  const Trace t = generate_trace(g);
  write_trace(o.generate, t);
  const TraceStats s = trace_stats(t);
  std::printf(
      "wrote %s: %llu requests (%llu forwards of %u layers x top-%u), %llu distinct experts; zipf %g, reuse %g, seed "
      "%llu\n",
      o.generate.c_str(), static_cast<unsigned long long>(s.requests), static_cast<unsigned long long>(s.tokens),
      g.layers, g.top_k, static_cast<unsigned long long>(s.distinct_keys), g.zipf, g.reuse,
      static_cast<unsigned long long>(g.seed));
  return 0;
}

int simulate(const SimOptions& o) {
  if (o.trace.empty()) throw UsageError("sim: a TRACE file to replay is required (or --generate-trace OUT)");
  std::optional<std::vector<std::string>> converter;
  if (!o.png.empty()) {
    converter = png_converter();
    if (!converter)
      throw UsageError("--png " + o.png +
                       ": no SVG converter on PATH (install rsvg-convert from librsvg2-bin, or ImageMagick's convert); "
                       "--svg writes the figure without one");
  }
  // Where the results go is checked before the trace is read and simulated.
  const std::pair<const char*, const std::string*> outputs[] = {{"--csv", &o.csv},
                                                                {"--json", &o.json},
                                                                {"--svg", &o.svg},
                                                                {"--png", &o.png}};
  for (const auto& [flag, file] : outputs)
    if (!file->empty()) check_output_file(*file, flag);
  const Trace trace = read_trace(o.trace);
  PluginHost host;
  SimRequest req;
  req.policies = chosen_policies(o, host);
  auto caps = split_commas(o.capacities);
  if (caps.empty()) caps = {"0.5x", "1x", "2x", "3x", "4x", "6x", "8x"};
  for (const std::string& c : caps) req.capacities.push_back(parse_capacity(c));
  req.expert_bytes = o.expert_bytes;
  req.bandwidth_gbps = o.bandwidth;
  const SimReport report = run_sim(host, trace, o.trace, req);

  std::fputs(sim_table(report).c_str(), stdout);
  if (!o.csv.empty()) write_report_file(o.csv, sim_csv(report));
  if (!o.json.empty()) write_report_file(o.json, sim_json(report));
  if (!o.svg.empty()) write_report_file(o.svg, sim_svg(report));
  if (converter) {
    const std::string pid = std::to_string(::getpid());
    std::string svg_in = o.svg;
    if (svg_in.empty()) {
      svg_in = o.png + ".tmp." + pid + ".svg";
      write_report_file(svg_in, sim_svg(report));
    }
    const std::string tmp_png = o.png + ".tmp." + pid + ".png";
    try {
      run_converter(*converter, svg_in, tmp_png);
      check_output_file(o.png, "--png");  // again: the rename replaces whatever is there now
      std::filesystem::rename(tmp_png, o.png);
    } catch (...) {
      std::filesystem::remove(tmp_png);
      if (o.svg.empty()) std::filesystem::remove(svg_in);
      throw;
    }
    if (o.svg.empty()) std::filesystem::remove(svg_in);
  }
  for (const std::string* f : {&o.csv, &o.json, &o.svg, &o.png})
    if (!f->empty()) std::printf("wrote %s\n", f->c_str());
  return 0;
}

}  // namespace

Command register_sim(CLI::App& app, GlobalOptions&) {
  auto* sub =
      app.add_subcommand("sim", "Replay an expert trace through cache policies (or generate a synthetic trace)");
  auto o = std::make_shared<SimOptions>();
  sub->add_option("trace", o->trace, "Trace file to replay (k3host trace format, docs/cache.md)");
  sub->add_option("--policy", o->policies,
                  "Cache plugins to simulate, comma-separated (default: every cache plugin found)")
      ->take_all();
  sub->add_option("--capacity", o->capacities,
                  "Capacities, comma-separated: slots (3647), decimal GB (64GB), or multiples of one token's "
                  "working set (2x); default 0.5x,1x,2x,3x,4x,6x,8x")
      ->take_all();
  sub->add_option("--param", o->params, "A policy parameter: POLICY.KEY=VALUE (repeatable)")->take_all();
  sub->add_option("--expert-bytes", o->expert_bytes,
                  "Bytes of one routed expert (default: the trace header's, else 17547264, the full K3)");
  sub->add_option("--bandwidth", o->bandwidth, "Read bandwidth in GB/s for the s/token estimate (default 3.2)");
  sub->add_option("--csv", o->csv, "Write the results as CSV");
  sub->add_option("--json", o->json, "Write the results as JSON");
  sub->add_option("--svg", o->svg, "Draw hit rate vs capacity to an SVG");
  sub->add_option("--png", o->png, "Also render the figure to PNG (needs rsvg-convert or ImageMagick convert)");
  sub->add_option("--generate-trace", o->generate, "Write a synthetic trace to this file instead of simulating");
  sub->add_option("--trace-preset", o->preset, "Generator settings from a YAML file (configs/traces/*.yaml)");
  sub->add_option("--layers", o->gen.layers, "Generator: layers");
  sub->add_option("--experts", o->gen.experts, "Generator: routed experts per layer");
  sub->add_option("--top-k", o->gen.top_k, "Generator: experts per token and layer");
  sub->add_option("--tokens", o->gen.tokens, "Generator: tokens");
  sub->add_option("--zipf", o->gen.zipf, "Generator: Zipf exponent of per-layer expert popularity (0 = uniform)");
  sub->add_option("--reuse", o->gen.reuse,
                  "Generator: probability that an expert of the previous token is chosen again");
  sub->add_option("--seed", o->gen.seed, "Generator: random seed");
  sub->add_option("--recompute-prompt", o->gen.recompute_prompt,
                  "Generator: emulate full-recompute decode from a prompt of this many tokens (0 = off)");
  sub->footer(
      "It keeps no state: Ctrl-C ends it at once, and a file it was writing is never left half-written (its "
      "temporary is removed by the next write of that file). Exit codes: 0 ok, 1 runtime failure, 2 a usage "
      "error or a bad trace.");
  return {sub, [o, sub]() { return o->generate.empty() ? simulate(*o) : generate(*o, *sub); }};
}

}  // namespace k3::cli
