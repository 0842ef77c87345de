#include <k3/runtime.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>

#include <k3/cluster.hpp>
#include <k3/draft_model.hpp>
#include <k3/error.hpp>
#include <k3/geometry.hpp>
#include <k3/make_model.hpp>
#include <k3/pipeline_plugins.hpp>
#include <k3/units.hpp>
#include <k3/user_files.hpp>

#include "io/small_file.hpp"
#include "io/uri.hpp"
#include "util/utf8.hpp"

namespace k3 {
namespace {

/// True when `uri` (a file's URI) opens through `storage`; false when it is not there.
bool exists_in_storage(sdk::StorageBackend& storage, const std::string& uri) {
  return io::open_file(storage, uri, "a checkpoint file", true) != nullptr;
}

/// The data folder's configs/default.yaml (the source tree's in a build, the installed copy
/// once installed: k3/data_dir.hpp), and any configs/default.yaml the pipeline extends (the
/// other tree's, given by path).
std::vector<std::filesystem::path> default_pipelines(const Pipeline& p) {
  std::vector<std::filesystem::path> out{default_pipeline_file()};
  for (const auto& f : p.files()) {
    const std::filesystem::path file(f);
    if (file.filename() == "default.yaml" && file.parent_path().filename() == "configs") out.push_back(file);
  }
  return out;
}

/// True when model.path is the demo location, the model.demo_path that configs/default.yaml
/// names (whichever file set model.path): the one folder a synthetic model may be generated
/// in on first use. A pipeline's own model.demo_path does not count, so no file can make
/// a mistyped real checkpoint folder fill up with random weights.
bool is_demo_location(const Pipeline& p) {
  if (io::has_uri_scheme(p.get_string("model.path"))) return false;
  std::error_code ec;
  const auto model = std::filesystem::weakly_canonical(p.get_path("model.path"), ec);
  if (ec) return false;
  for (const auto& file : default_pipelines(p)) {
    if (!std::filesystem::is_regular_file(file, ec)) continue;
    const auto demo = std::filesystem::weakly_canonical(load_pipeline(file).get_path("model.demo_path"), ec);
    if (!ec && demo == model) return true;
  }
  return false;
}

/// Makes sure a checkpoint is at model.path, generating the demo one where allowed.
void ensure_checkpoint(const Pipeline& p, sdk::StorageBackend& storage, const std::string& uri,
                       const LoadHooks& hooks) {
  // Whether the checkpoint is there is asked of the storage plugin, which may serve URLs.
  if (exists_in_storage(storage, io::join_uri(uri, "config.json"))) return;
  // Only the demo location may be filled with a synthetic model: anywhere else a missing
  // checkpoint is a typo or an unreachable URL, and a fake model must never run instead.
  const bool demo = is_demo_location(p);
  if (!demo || !p.get_bool("model.generate_if_missing"))
    throw UsageError(uri + ": no checkpoint there (no config.json; model.path from " + p.where("model.path") +
                     "): check the path, or write a synthetic one with `k3host make-model -g <geometry> -o " + uri +
                     "`" +
                     (demo ? " or set model.generate_if_missing: true"
                           : "; only the demo location of configs/default.yaml is generated on first use"));
  const std::string geometry = p.get_string("model.geometry");
  if (hooks.on_status)
    hooks.on_status("generating the synthetic '" + geometry + "' checkpoint in " + uri + " (first run only)");
  MakeModelOptions opts;
  opts.out = uri;
  opts.progress = [&](std::uint64_t done, std::uint64_t total) {
    // Minutes of work for the demo model: a stop request ends it between batches, and
    // make_model's temporary folder goes with the exception.
    if (hooks.stop != nullptr && hooks.stop->load())
      throw Error(ExitCode::interrupted, "interrupted while writing the synthetic '" + geometry + "' checkpoint in " +
                                             uri + ": nothing of it was kept (the next run writes it again)");
    if (hooks.on_progress) hooks.on_progress("writing " + geometry + " checkpoint", done, total);
  };
  make_model(load_geometry(geometry), opts);
}

/// The model's settings from the pipeline; its plugins come from create_pipeline_plugins
/// (the names and parameters here stay unset: they are read there alone).
ModelSettings model_settings_of(const Pipeline& p, RunSequences sequences) {
  ModelSettings ms;
  ms.threads = static_cast<int>(p.get_int("threads"));
  ms.memory = sequences == RunSequences::batched ? batched_plan_inputs(p) : plan_inputs(p);
  ms.cache_future = p.get_path("cache.future");
  ms.prefetch_depth = static_cast<std::size_t>(p.get_int("cache.prefetch.depth"));
  ms.prefetch_bytes_per_token =
      static_cast<std::uint64_t>(std::llround(p.get_double("cache.prefetch.mb_per_token") * 1e6));
  ms.packed_trunk = p.get_path("model.packed_trunk");
  return ms;
}

/// job.speculative.draft_model, when drafting is on: loaded resident on the run's own storage
/// backend and kernel set (each plugin object is created once per run), with the model's
/// threads. Null when not set.
std::shared_ptr<DraftModel> load_draft_model(const Pipeline& p, const Model& target,
                                             const ModelSettings& target_settings, const LoadHooks& hooks) {
  const char* key = "job.speculative.draft_model";
  const std::string uri = p.get_path(key).string();
  if (uri.empty() || p.get_int("job.speculative.max_draft") <= 0) return nullptr;
  ModelSettings ms;
  ms.threads = target_settings.threads;
  // Sized to fit (a draft model is small); DraftModel refuses one whose plan streams, and
  // without a cache policy the model itself refuses to stream.
  ms.memory.context = target_settings.memory.context;
  ms.memory.prefill_chunk = target_settings.memory.prefill_chunk;
  ModelPlugins shared;
  shared.storage = target.storage();
  shared.storage_name = target.storage_plugin();
  shared.kernels = target.kernels();
  shared.kernel_name = target.kernel_set();
  std::shared_ptr<DraftModel> out;
  p.at_key(key, [&] {
    if (!exists_in_storage(*target.storage(), io::join_uri(uri, "config.json")))
      throw UsageError(uri + ": no draft model there (no config.json)");
    if (hooks.on_status) hooks.on_status("loading the draft model " + uri);
    // at_key names where and the key; the draft model's own messages add only its path.
    out = std::make_shared<DraftModel>(std::make_unique<Model>(uri, std::move(shared), ms), target.config(),
                                       std::string());
  });
  if (hooks.on_status)
    hooks.on_status("draft model " + uri + ": " + std::to_string(out->model().config().num_hidden_layers) +
                    " layers, " + format_bytes(out->resident_bytes()) + " resident beside the plan above");
  return out;
}

}  // namespace

Runtime::Runtime(const Pipeline& p, PluginHost& host, const LoadHooks& hooks, RunSequences sequences)
    // Plugin names and parameters first: a typo is reported before minutes of model generation.
    : Runtime(p, host, create_pipeline_plugins(p, host), hooks, sequences) {}

Runtime::Runtime(const Pipeline& p, PluginHost& host, ModelPlugins plugins, const LoadHooks& hooks,
                 RunSequences sequences) {
  uri_ = p.get_path("model.path").string();
  ensure_checkpoint(p, *plugins.storage, uri_, hooks);
  const auto t0 = std::chrono::steady_clock::now();
  settings_ = model_settings_of(p, sequences);
  if (p.get_string("cluster.transport") != "none" && hooks.cluster == nullptr)
    p.refuse("cluster.transport",
             "a model split over ranks runs the batch job, --prompts, chat and serve (under mpirun); "
             "this command runs in one process: set cluster.transport: none");
  if (Cluster* cluster = hooks.cluster) {
    settings_.layers = [cluster, &p](const ModelConfig& c) {
      const LayerRange r = cluster->layers_of(p, c);
      return std::pair<std::size_t, std::size_t>{r.first, r.last};
    };
  }
  if (hooks.on_status) hooks.on_status("loading " + uri_);
  model_ = std::make_unique<Model>(uri_, std::move(plugins), settings_);
  if (hooks.cluster != nullptr && hooks.cluster->rank() == 0) hooks.cluster->attach(*model_);
  tokenizer_ = create_pipeline_tokenizer(p, host, uri_, model_->storage());
  load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (hooks.on_plan) hooks.on_plan(model_->plan().table());
  draft_model_ = load_draft_model(p, *model_, settings_, hooks);
  const std::string thinking = p.get_string("model.thinking");
  thinking_ = thinking == "auto" ? model_->config().thinking.value_or(true) : thinking == "on";
  if (hooks.on_status) {
    // Said at every load, so nobody mistakes the demo's noise for a broken engine.
    if (model_->config().synthetic)
      hooks.on_status(uri_ +
                      " is a synthetic K3 checkpoint (k3host make-model): its weights are random, so the "
                      "generated text is noise by design; it shows speed, memory and exactness, not language");
    hooks.on_status(model_->plan().summary());
  }
}

std::vector<std::uint32_t> Runtime::encode(const std::string& text) const {
  std::vector<std::uint32_t> ids;
  const sdk::Status st = tokenizer_->encode(text, false, ids);
  if (!st.ok()) throw UsageError("the text cannot be tokenised: " + st.detail);
  return ids;
}

std::string Runtime::decode(const std::vector<std::uint32_t>& ids) const {
  std::string out;
  const sdk::Status st = tokenizer_->decode(ids, out);
  if (!st.ok()) throw RuntimeError("decoding the output failed: " + st.detail);
  return out;
}

bool generates_missing_checkpoint(const Pipeline& p) {
  return p.get_bool("model.generate_if_missing") && is_demo_location(p);
}

bool set_by_user(const Pipeline& p, std::string_view key) {
  if (p.where(key) == "default") return false;
  const std::filesystem::path file = p.source_file(key);
  if (file.empty()) return true;  // a --set override
  std::error_code ec;
  const auto canonical = std::filesystem::weakly_canonical(file, ec);
  if (ec) return true;
  for (const auto& base : default_pipelines(p))
    if (std::filesystem::weakly_canonical(base, ec) == canonical && !ec) return false;
  return true;
}

GenerateSettings generate_settings_of(const Pipeline& p, const ModelConfig& config) {
  GenerateSettings g;
  g.max_new_tokens = p.get_int("job.max_new_tokens");
  g.mode = p.get_string("job.mode") == "recompute" ? DecodeMode::recompute : DecodeMode::incremental;
  g.prefill_chunk = p.get_int("job.prefill_chunk");
  g.speculative.max_draft = p.get_int("job.speculative.max_draft");
  g.speculative.ngram = p.get_int("job.speculative.ngram");
  g.speculative.min_ngram = p.get_int("job.speculative.min_ngram");
  g.speculative.adaptive = p.get_bool("job.speculative.adaptive");
  g.speculative.draft_min_p = p.get_double("job.speculative.draft_min_p");
  g.sampling.temperature = p.get_double("job.sampling.temperature");
  g.sampling.top_k = p.get_int("job.sampling.top_k");
  g.sampling.top_p = p.get_double("job.sampling.top_p");
  g.sampling.min_p = p.get_double("job.sampling.min_p");
  g.sampling.repeat_penalty = p.get_double("job.sampling.repeat_penalty");
  g.sampling.repeat_last_n = p.get_int("job.sampling.repeat_last_n");
  g.sampling.seed = static_cast<std::uint64_t>(p.get_int("job.sampling.seed"));
  g.stop_at_eos = p.get_bool("job.stop_at_eos");
  g.eos_token = static_cast<std::uint32_t>(config.eos_token_id);
  g.dump_logits = p.get_path("job.dump_logits");
  return g;
}

GenerateSettings generate_settings_of(const Pipeline& p, const Runtime& runtime) {
  GenerateSettings g = generate_settings_of(p, runtime.model().config());
  if (g.speculative.max_draft > 0) g.speculative.model = runtime.draft_model();
  const std::filesystem::path store = p.get_path("job.speculative.datastore");
  if (!store.empty() && g.speculative.max_draft > 0) {
    const std::string what = p.where("job.speculative.datastore") + ": job.speculative.datastore";
    const std::string text = read_text_file(store, what, kMaxTextFileBytes);
    std::vector<std::uint32_t> ids;
    try {
      ids = runtime.encode(text);
    } catch (const UsageError& e) {
      throw UsageError(what + ": " + store.string() + ": " + e.what());  // binary data: which file, which key
    }
    g.speculative.store = std::make_shared<const DraftStore>(std::move(ids));
  }
  return g;
}

std::string read_text_file(const std::filesystem::path& file, const std::string& what, std::uint64_t max_bytes) {
  return read_user_file(file, what, "text file", max_bytes);
}

std::string TextStream::push(std::uint32_t id) {
  ids_.push_back(id);
  const std::string text = runtime_.decode(ids_);
  const std::size_t complete = util::whole_utf8_prefix(text);
  if (complete <= printed_) return {};
  std::string out = text.substr(printed_, complete - printed_);
  printed_ = complete;
  return out;
}

std::string TextStream::flush() {
  const std::string text = runtime_.decode(ids_);
  std::string out = printed_ < text.size() ? text.substr(printed_) : std::string();
  printed_ = text.size();
  return out;
}

void TextStream::clear() noexcept {
  ids_.clear();
  printed_ = 0;
}

}  // namespace k3
