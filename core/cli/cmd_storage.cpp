// k3host storage warm: reads the trunk and the chosen routed experts of the pipeline's
// checkpoint once through its storage plugin, so a `tiered` backend fills its local tier
// before the first run (over any other backend it is a plain read: the page cache warms).
// Progress goes to stderr; the summary line to stdout. A read failure is exit 1 naming it.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <k3/checkpoint.hpp>
#include <k3/error.hpp>
#include <k3/pipeline.hpp>
#include <k3/plugin_host.hpp>
#include <k3/runtime.hpp>

#include "cli.hpp"

namespace k3::cli {
namespace {

struct WarmArgs {
  std::string experts = "all";  ///< all | none | L:E,L:E,... | L:* (every expert of layer L)
};

/// The (layer, expert) of a routed expert's tensor, from "...layers.{L}....experts.{E}....".
std::optional<std::pair<long, long>> expert_of(const std::string& name) {
  const auto e = name.find(".experts.");
  const auto l = name.find("layers.");
  if (e == std::string::npos || l == std::string::npos) return std::nullopt;
  return std::pair{std::stol(name.substr(l + 7)), std::stol(name.substr(e + 9))};
}

/// Parses --experts: an empty optional means all; a set of (layer, expert) with expert -1
/// meaning every expert of the layer.
std::optional<std::set<std::pair<long, long>>> parse_experts(const std::string& v) {
  if (v == "all") return std::nullopt;
  std::set<std::pair<long, long>> out;
  if (v == "none") return out;
  std::size_t at = 0;
  while (at <= v.size()) {
    const auto comma = std::min(v.find(',', at), v.size());
    const std::string item = v.substr(at, comma - at);
    const auto colon = item.find(':');
    try {
      if (colon == std::string::npos) throw std::invalid_argument(item);
      const long layer = std::stol(item.substr(0, colon));
      const std::string e = item.substr(colon + 1);
      out.emplace(layer, e == "*" ? -1 : std::stol(e));
    } catch (const std::exception&) {
      throw UsageError(
          "storage warm: --experts: expected all, none or a list LAYER:EXPERT or LAYER:* (e.g. 1:0,1:5,2:*), got '" +
          item + "'");
    }
    at = comma + 1;
  }
  return out;
}

struct Piece {
  std::uint32_t file;
  std::uint64_t offset, nbytes;
  bool expert;
};

/// The tensors to warm (the trunk, and the routed experts `chosen` names: every one when it
/// is empty), the trunk first, then experts; in file order within each, so reads are
/// sequential. `total` gets their bytes.
std::vector<Piece> warm_pieces(const CheckpointIndex& index,
                               const std::optional<std::set<std::pair<long, long>>>& chosen, std::uint64_t& total) {
  std::vector<Piece> pieces;
  total = 0;
  for (const auto& t : index.tensors()) {
    const auto e = expert_of(t.name);
    if (e && chosen && !chosen->contains(*e) && !chosen->contains({e->first, -1})) continue;
    pieces.push_back({t.file, t.offset, t.nbytes, e.has_value()});
    total += t.nbytes;
  }
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
    return std::tie(a.expert, a.file, a.offset) < std::tie(b.expert, b.file, b.offset);
  });
  return pieces;
}

/// Reads `pieces` (consumed) through `storage` in batches of up to 64 MB, showing progress
/// on stderr: a line redrawn on a terminal, every quarter otherwise. Apart from
/// run_storage_warm: the batching loop is one topic.
void warm_read_pieces(sdk::StorageBackend& storage, const CheckpointIndex& index, std::vector<Piece>& pieces,
                      std::uint64_t total, bool tty) {
  constexpr std::uint64_t kBatchBytes = std::uint64_t{64} << 20;
  std::vector<std::byte> buffer(
      static_cast<std::size_t>(std::min<std::uint64_t>(kBatchBytes, std::max<std::uint64_t>(total, 1))));
  std::uint64_t done = 0;
  int shown = -1;
  auto progress = [&](bool expert) {
    const int pct = total == 0 ? 100 : static_cast<int>(done * 100 / total);
    if (pct == shown || (!tty && pct % 25 != 0 && pct != 100)) return;
    shown = pct;
    std::fprintf(stderr, "%swarm: %3d%%  %.1f of %.1f MB  (%s)%s", tty ? "\r" : "", pct,
                 static_cast<double>(done) / 1e6, static_cast<double>(total) / 1e6, expert ? "experts" : "trunk",
                 tty ? "" : "\n");
    std::fflush(stderr);
  };
  std::unique_ptr<sdk::StorageFile> file;
  std::uint32_t open_file = UINT32_MAX;
  std::size_t i = 0;
  progress(false);
  while (i < pieces.size()) {
    const Piece& first = pieces[i];
    if (first.file != open_file) {
      file.reset();
      const auto& shard = index.files()[first.file];
      if (sdk::Status st = storage.open(shard.uri, file); !st.ok())
        throw RuntimeError("storage warm: " + shard.uri + ": " + st.detail);
      open_file = first.file;
    }
    // One batch: consecutive pieces of this file that fit the buffer (a large
    // tensor alone is read in buffer-sized parts).
    std::vector<sdk::ReadRequest> batch;
    std::uint64_t used = 0;
    while (i < pieces.size() && pieces[i].file == open_file && pieces[i].expert == first.expert) {
      Piece& pc = pieces[i];
      const std::uint64_t n = std::min<std::uint64_t>(pc.nbytes, buffer.size() - used);
      if (n == 0) break;
      batch.push_back({pc.offset, n, buffer.data() + used, sdk::StatusCode::ok});
      used += n;
      pc.offset += n;
      pc.nbytes -= n;
      if (pc.nbytes == 0) ++i;
      if (used == buffer.size()) break;
    }
    if (sdk::Status st = file->read(batch); !st.ok())
      throw RuntimeError("storage warm: " + index.files()[open_file].uri + ": " + st.detail);
    done += used;
    progress(first.expert);
  }
}

/// The small files a run reads besides the shards (absent ones are skipped).
void warm_small_files(sdk::StorageBackend& storage, const std::string& uri) {
  for (const char* name : {"config.json", "model.safetensors.index.json", "tokenizer_config.json", "tiktoken.model",
                           "generation_config.json"}) {
    std::unique_ptr<sdk::StorageFile> small;
    const std::string small_uri = checkpoint_file_uri(uri, name);
    if (sdk::Status st = storage.open(small_uri, small); !st.ok()) {
      if (st.code == sdk::StatusCode::not_found) continue;
      throw RuntimeError("storage warm: " + small_uri + ": " + st.detail);
    }
    std::vector<std::byte> bytes(static_cast<std::size_t>(small->size()));
    sdk::ReadRequest r{0, small->size(), bytes.data(), sdk::StatusCode::ok};
    if (sdk::Status st = small->read({&r, 1}); !st.ok())
      throw RuntimeError("storage warm: " + small_uri + ": " + st.detail);
  }
}

/// `k3host storage warm`: the pipeline's storage plugin reads the chosen tensors and the
/// small files once; the summary line goes to stdout. Apart from register_storage, which
/// only declares the command.
int run_storage_warm(const WarmArgs& args, const GlobalOptions& global) {
  if (global.config.empty()) throw UsageError("storage warm: no pipeline given: use --config PRESET or --config FILE");
  const auto chosen = parse_experts(args.experts);
  const Pipeline p = load_pipeline(global.config, global.overrides);
  const std::string uri = p.get_path("model.path").string();
  PluginHost host(p.plugin_path());
  const ModelPlugins made = create_pipeline_plugins(p, host, PluginParts::storage);
  const auto& storage = made.storage;
  const CheckpointIndex index = CheckpointIndex::open(*storage, uri);

  std::uint64_t total = 0;
  std::vector<Piece> pieces = warm_pieces(index, chosen, total);
  const bool tty = ::isatty(2) != 0;
  const auto start = std::chrono::steady_clock::now();
  warm_read_pieces(*storage, index, pieces, total, tty);
  warm_small_files(*storage, uri);
  if (tty) std::fputc('\n', stderr);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("warm: read %.1f MB (%s experts) of %s through storage %s in %.2f s\n", static_cast<double>(total) / 1e6,
              args.experts.c_str(), uri.c_str(), made.storage_name.c_str(), secs);
  std::fflush(stdout);
  return 0;
}

}  // namespace

Command register_storage(CLI::App& app, GlobalOptions& global) {
  auto args = std::make_shared<WarmArgs>();
  auto* sub = app.add_subcommand("storage", "Storage tools (warm: fill a tiered backend's local tier)");
  sub->require_subcommand(1);
  auto* warm = sub->add_subcommand("warm",
                                   "Read the trunk and chosen routed experts once through the pipeline's storage, "
                                   "so a tiered backend holds them locally");
  warm->add_option("--experts", args->experts,
                   "Which routed experts: all (default), none, or LAYER:EXPERT / LAYER:* items, comma-separated");
  warm->footer(
      "Ctrl-C ends it at once: the blocks already in the tier stay, a block being written is never kept half "
      "(it is renamed into place only when complete). Exit codes: 0 ok, 1 a read failed, 2 a usage or "
      "configuration error.");
  return {sub, [args, &global, warm]() {
            if (!warm->parsed()) throw UsageError("storage: expected a subcommand (warm)");
            return run_storage_warm(*args, global);
          }};
}

}  // namespace k3::cli
