#include <k3/job.hpp>

#include <chrono>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include <k3/error.hpp>
#include <k3/make_model.hpp>
#include <k3/model.hpp>
#include <k3/geometry.hpp>
#include <k3/trace.hpp>

#include "io/small_file.hpp"
#include "io/uri.hpp"
#include "streaming/cache_future.hpp"
#include "util/atomic_file.hpp"

namespace k3 {
namespace {

std::vector<std::uint32_t> parse_ids(const std::vector<std::string>& items, std::int64_t vocab) {
  std::vector<std::uint32_t> ids;
  for (const auto& s : items) {
    std::size_t pos = 0;
    long long v = -1;
    try {
      v = std::stoll(s, &pos);
    } catch (...) {
      pos = 0;
    }
    if (pos != s.size() || v < 0 || v >= vocab)
      throw UsageError("job.ids: '" + s + "' is not a token id of this model (0 … " + std::to_string(vocab - 1) + ")");
    ids.push_back(static_cast<std::uint32_t>(v));
  }
  return ids;
}

std::string read_text_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw UsageError(p.string() + ": cannot read the prompt file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Runs `f`; a UsageError it throws is reported at `key`'s place in the pipeline file.
template <class F>
void at_key(const Pipeline& p, std::string_view key, F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    p.refuse(key, e.what());
  }
}

/// A plugin's leftover parameters, refused at `key`.
void refuse_unknown(const Pipeline& p, std::string_view key, const std::string& plugin,
                    const std::vector<std::string>& unknown) {
  if (unknown.empty()) return;
  std::string names;
  for (const auto& u : unknown) names += (names.empty() ? "'" : ", '") + u + "'";
  p.refuse(key, "plugin '" + plugin + "' has no parameter " + names + " (its README lists the parameters)");
}

/// Creates the storage, cache and kernel plugins the pipeline names: the objects the model
/// runs on (each made once per run), created before the model loads so that a wrong name
/// or parameter is reported at its line.
ModelPlugins create_plugins(const Pipeline& p, PluginHost& host) {
  ModelPlugins out;
  struct Section {
    PluginKind kind;
    const char* plugin_key;
    const char* params_key;
  };
  for (const Section s : {Section{PluginKind::storage, "storage.plugin", "storage.params"},
                          Section{PluginKind::cache, "cache.policy", "cache.params"},
                          Section{PluginKind::kernels, "kernels.set", "kernels.params"}}) {
    std::string name = p.get_string(s.plugin_key);
    if (s.kind == PluginKind::kernels && name == "auto") name = host.best_kernels().name;
    at_key(p, s.plugin_key, [&] { (void)host.find(s.kind, name); });
    const PluginParams params = p.get_params(s.params_key);
    std::vector<std::string> unknown;
    at_key(p, s.params_key, [&] {
      if (s.kind == PluginKind::storage) out.storage = host.create_storage(name, params, &unknown);
      if (s.kind == PluginKind::cache) out.cache = host.create_cache(name, params, &unknown);
      if (s.kind == PluginKind::kernels) out.kernels = host.create_kernels(name, params, &unknown);
    });
    if (s.kind == PluginKind::kernels) out.kernel_name = name;
    refuse_unknown(p, s.params_key, name, unknown);
  }
  return out;
}

/// True when `uri` (a file's URI) opens through `storage`; false when it is not there.
bool exists_in_storage(sdk::StorageBackend& storage, const std::string& uri) {
  return io::open_file(storage, uri, "a checkpoint file", true) != nullptr;
}

/// The tokenizer section, defaulting its files to the checkpoint's own, which the plugin
/// reads through `storage` (the pipeline's storage plugin, HostServices::read_file).
std::shared_ptr<sdk::Tokenizer> make_tokenizer(const Pipeline& p, PluginHost& host, const std::string& model_uri,
                                               const std::shared_ptr<sdk::StorageBackend>& storage) {
  PluginParams params = p.get_params("tokenizer.params");
  auto has = [&](const char* k) {
    for (const auto& kv : params)
      if (kv.first == k) return true;
    return false;
  };
  if (!has("model")) params.emplace_back("model", io::join_uri(model_uri, "tiktoken.model"));
  const std::string config = io::join_uri(model_uri, "tokenizer_config.json");
  if (!has("config") && exists_in_storage(*storage, config)) params.emplace_back("config", config);
  host.set_file_storage(storage);
  const std::string name = p.get_string("tokenizer.plugin");
  at_key(p, "tokenizer.plugin", [&] { (void)host.find(PluginKind::tokenizer, name); });
  std::vector<std::string> unknown;
  std::shared_ptr<sdk::Tokenizer> tok;
  at_key(p, "tokenizer.params", [&] { tok = host.create_tokenizer(name, params, &unknown); });
  refuse_unknown(p, "tokenizer.params", name, unknown);
  return tok;
}

std::string decode(sdk::Tokenizer& tok, const std::vector<std::uint32_t>& ids) {
  std::string out;
  const sdk::Status st = tok.decode(ids, out);
  if (!st.ok()) throw RuntimeError("decoding the output failed: " + st.detail);
  return out;
}

/// The configs/default.yaml of this source tree, and any configs/default.yaml the pipeline
/// extends (an installed copy).
std::vector<std::filesystem::path> default_pipelines(const Pipeline& p) {
  std::vector<std::filesystem::path> out{std::filesystem::path(K3_SOURCE_DIR) / "configs" / "default.yaml"};
  for (const auto& f : p.files()) {
    const std::filesystem::path file(f);
    if (file.filename() == "default.yaml" && file.parent_path().filename() == "configs") out.push_back(file);
  }
  return out;
}

/// True when model.path is the demo location that configs/default.yaml names (whichever
/// file set it): the one folder a synthetic model may be generated in on first use.
bool is_demo_location(const Pipeline& p) {
  if (io::has_uri_scheme(p.get_string("model.path"))) return false;
  std::error_code ec;
  const auto model = std::filesystem::weakly_canonical(p.get_path("model.path"), ec);
  if (ec) return false;
  for (const auto& file : default_pipelines(p)) {
    if (!std::filesystem::is_regular_file(file, ec)) continue;
    const auto demo = std::filesystem::weakly_canonical(load_pipeline(file, {}).get_path("model.path"), ec);
    if (!ec && demo == model) return true;
  }
  return false;
}

/// Records the routing of a live run into a trace file, with its serving groups.
struct TraceRecorder final : RoutingListener {
  TraceRecorder(const std::filesystem::path& file, const TraceHeader& header) : writer(file, header) {}
  void on_group(std::size_t, std::size_t) override { writer.begin_group(); }
  void on_route(std::int64_t position, std::size_t layer, std::span<const std::uint32_t> experts) override {
    writer.add_layer(position, layer, experts);
  }
  TraceWriter writer;
};

}  // namespace

JobReport run_job(const Pipeline& p, const JobHooks& hooks) {
  PluginHost host(p.plugin_path());
  return run_job(p, host, hooks);
}

JobReport run_job(const Pipeline& p, PluginHost& host, const JobHooks& hooks) {
  auto status = [&](const std::string& s) {
    if (hooks.on_status) hooks.on_status(s);
  };
  JobReport rep;
  // Plugin names and parameters first: a typo is reported before minutes of model generation.
  ModelPlugins plugins = create_plugins(p, host);
  rep.model = p.get_path("model.path").string();
  // Whether the checkpoint is there is asked of the storage plugin, which may serve URLs.
  const bool present = exists_in_storage(*plugins.storage, io::join_uri(rep.model, "config.json"));
  if (!present) {
    // Only the demo location may be filled with a synthetic model: anywhere else a missing
    // checkpoint is a typo or an unreachable URL, and a fake model must never run instead.
    const bool demo = is_demo_location(p);
    if (!demo || !p.get_bool("model.generate_if_missing"))
      throw UsageError(rep.model + ": no checkpoint there (no config.json; model.path from " + p.where("model.path") +
                       "): check the path, or write a synthetic one with `k3host make-model -g <geometry> -o " +
                       rep.model + "`" +
                       (demo ? " or set model.generate_if_missing: true"
                             : "; only the demo location of configs/default.yaml is generated on first use"));
    const std::string geometry = p.get_string("model.geometry");
    status("generating the synthetic '" + geometry + "' checkpoint in " + rep.model + " (first run only)");
    MakeModelOptions opts;
    opts.out = rep.model;
    opts.progress = [&](std::uint64_t done, std::uint64_t total) {
      if (hooks.on_progress) hooks.on_progress("writing " + geometry + " checkpoint", done, total);
    };
    make_model(load_geometry(geometry), opts);
  }

  const auto t0 = std::chrono::steady_clock::now();
  ModelSettings ms;
  ms.storage = p.get_string("storage.plugin");
  ms.storage_params = p.get_params("storage.params");
  ms.kernels = p.get_string("kernels.set");
  ms.kernel_params = p.get_params("kernels.params");
  ms.threads = static_cast<int>(p.get_int("threads"));
  ms.memory = plan_inputs(p);
  ms.cache_policy = p.get_string("cache.policy");
  ms.cache_params = p.get_params("cache.params");
  ms.cache_future = p.get_path("cache.future");
  ms.packed_trunk = p.get_path("model.packed_trunk");
  status("loading " + rep.model);
  Model model(rep.model, std::move(plugins), ms);
  auto tokenizer = make_tokenizer(p, host, rep.model, model.storage());
  rep.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rep.plan = model.plan();
  rep.plan_text = rep.plan.table();
  if (hooks.on_plan) hooks.on_plan(rep.plan_text);
  rep.streaming = model.streaming();
  rep.cache_policy = ms.cache_policy;
  rep.kernels = model.kernel_set();
  rep.storage = ms.storage;
  rep.threads = model.threads();

  // The prompt: ids, a file, or text (first one set wins, in that order).
  GenerateSettings g;
  const auto ids = p.get_strings("job.ids");
  if (!ids.empty()) {
    g.prompt = parse_ids(ids, model.config().vocab_size);
  } else {
    const std::filesystem::path file = p.get_path("job.prompt_file");
    rep.prompt_text = file.empty() ? p.get_string("job.prompt") : read_text_file(file);
    const sdk::Status st = tokenizer->encode(rep.prompt_text, false, g.prompt);
    if (!st.ok()) throw UsageError("the prompt cannot be tokenised: " + st.detail);
  }
  if (rep.prompt_text.empty() && !g.prompt.empty()) rep.prompt_text = decode(*tokenizer, g.prompt);
  g.max_new_tokens = p.get_int("job.max_new_tokens");
  rep.mode = p.get_string("job.mode");
  g.mode = rep.mode == "recompute" ? DecodeMode::recompute : DecodeMode::incremental;
  g.prefill_chunk = p.get_int("job.prefill_chunk");
  g.sampling.temperature = p.get_double("job.sampling.temperature");
  g.sampling.top_k = p.get_int("job.sampling.top_k");
  g.sampling.top_p = p.get_double("job.sampling.top_p");
  g.sampling.seed = static_cast<std::uint64_t>(p.get_int("job.sampling.seed"));
  g.stop_at_eos = p.get_bool("job.stop_at_eos");
  g.eos_token = static_cast<std::uint32_t>(model.config().eos_token_id);
  g.dump_logits = p.get_path("job.dump_logits");

  Session session(model, p.get_int("memory.context"));
  const std::filesystem::path load_state = p.get_path("job.load_state");
  if (!load_state.empty()) session.load(load_state);
  if (hooks.on_prompt) hooks.on_prompt(rep.prompt_text, g.prompt);
  // cache.future must be a trace of this prompt (the model checked the rest).
  if (!ms.cache_future.empty())
    require_trace_of_run(ms.cache_future, read_trace_header(ms.cache_future),
                         cache::trace_header_of(model.config(), trace_prompt_hash(g.prompt)), true);

  // trace.out: every routed-expert request of this run, in request order (docs/cache.md).
  std::unique_ptr<TraceRecorder> trace;
  const std::filesystem::path trace_file = p.get_path("trace.out");
  if (!trace_file.empty()) {
    trace = std::make_unique<TraceRecorder>(trace_file,
                                            cache::trace_header_of(model.config(), trace_prompt_hash(g.prompt)));
    session.set_routing_listener(trace.get());
  }

  std::vector<std::uint32_t> so_far;
  std::string printed;
  // Stream counters at each generated token: the forward pass of step s runs between the
  // callbacks of tokens s and s+1 (the last step runs none).
  std::vector<StreamStats> marks;
  rep.result = generate(session, g, [&](std::uint32_t id) {
    marks.push_back(model.stream_stats());
    so_far.push_back(id);
    if (!hooks.on_token) return;
    // Print the text that became complete with this token (BPE pieces may split UTF-8).
    const std::string text = decode(*tokenizer, so_far);
    hooks.on_token(id, text.substr(std::min(printed.size(), text.size())));
    printed = text;
  });
  rep.generated_text = decode(*tokenizer, rep.result.generated);
  // Decode speed counts the forward passes: the last token is sampled from the previous
  // step's logits and needs none, so N tokens cost N-1 decode forwards.
  double decode_s = 0;
  std::size_t forwards = 0;
  for (const auto& s : rep.result.steps) {
    decode_s += s.seconds;
    forwards += s.forward ? 1 : 0;
  }
  rep.decode_forwards = forwards;
  rep.tokens_per_second = decode_s > 0 ? static_cast<double>(forwards) / decode_s : 0;
  rep.peak_rss = peak_rss_bytes();
  rep.weight_bytes_read = model.weight_bytes_read();
  rep.io = model.stream_stats();
  marks.push_back(rep.io);
  for (std::size_t i = 0; i + 1 < marks.size(); ++i) {
    const StreamStats &a = marks[i], &b = marks[i + 1];
    rep.step_io.push_back({b.expert_bytes - a.expert_bytes, b.trunk_bytes - a.trunk_bytes, b.table_bytes - a.table_bytes,
                           b.expert_requests - a.expert_requests, b.expert_hits - a.expert_hits,
                           b.io_wait_seconds - a.io_wait_seconds});
  }
  rep.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rep.io_share = rep.wall_seconds > 0 ? rep.io.io_wait_seconds / rep.wall_seconds : 0;
  rep.seconds_per_token = forwards == 0 ? 0 : decode_s / static_cast<double>(forwards);
  rep.expert_failures = rep.io.expert_failures;

  if (trace) {
    session.set_routing_listener(nullptr);
    trace->writer.close();
    rep.trace_file = trace_file;
  }
  const std::filesystem::path save_state = p.get_path("job.save_state");
  if (!save_state.empty()) session.save(save_state);
  rep.report_file = p.get_path("job.report");
  if (!rep.report_file.empty()) write_file_atomically(rep.report_file, report_json(rep));
  return rep;
}

std::string report_json(const JobReport& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["kernels"] = r.kernels;
  j["storage"] = r.storage;
  j["threads"] = r.threads;
  j["mode"] = r.mode;
  j["prompt_text"] = r.prompt_text;
  j["prompt_ids"] = r.result.prompt;
  j["generated_ids"] = r.result.generated;
  j["generated_text"] = r.generated_text;
  j["stopped_at_eos"] = r.result.stopped_at_eos;
  if (!r.trace_file.empty()) j["trace"] = r.trace_file.string();
  j["load_seconds"] = r.load_seconds;
  j["prefill_seconds"] = r.result.prefill_seconds;
  nlohmann::json steps = nlohmann::json::array();
  for (std::size_t i = 0; i < r.result.steps.size(); ++i) {
    const auto& s = r.result.steps[i];
    nlohmann::json step = {{"token", s.token}, {"seconds", s.seconds}, {"forward", s.forward}};
    if (i < r.step_io.size()) {
      const StepIo& io = r.step_io[i];
      step["expert_bytes_read"] = io.expert_bytes;
      step["trunk_bytes_read"] = io.trunk_bytes;
      step["table_bytes_read"] = io.table_bytes;
      step["expert_requests"] = io.expert_requests;
      step["expert_hits"] = io.expert_hits;
      step["true_hit_rate"] = io.hit_rate();
      step["io_wait_seconds"] = io.io_wait_seconds;
    }
    steps.push_back(step);
  }
  j["steps"] = steps;
  const MemoryPlan& p = r.plan;
  j["plan"] = {{"total_bytes", p.total},
               {"available_bytes", p.available},
               {"streaming", r.streaming},
               {"trunk_pinned_layers", p.pinned_count},
               {"trunk_layers", p.layer_bytes.size()},
               {"trunk_pinned_bytes", p.pinned_bytes},
               {"trunk_ring_slots", p.ring_slots},
               {"trunk_ring_slot_bytes", p.ring_slot_bytes},
               {"expert_slots", p.expert_slots},
               {"expert_slot_bytes", p.expert_slot_bytes},
               {"experts_total", p.experts_total},
               {"embedding_bytes", p.embedding_bytes},
               {"lm_head_bytes", p.lm_head_bytes},
               {"lm_head_chunk_rows", p.lm_head_chunk_rows},
               {"kda_state_bytes", p.kda_state_bytes},
               {"mla_kv_bytes", p.mla_kv_bytes},
               {"buffer_bytes", p.buffer_bytes},
               {"overhead_bytes", p.overhead_bytes},
               {"text", r.plan_text}};
  j["cache_policy"] = r.cache_policy;
  j["bytes_read"] = {{"trunk", r.io.trunk_bytes}, {"experts", r.io.expert_bytes}, {"embedding_head", r.io.table_bytes}};
  j["expert_requests"] = r.io.expert_requests;
  j["expert_hits"] = r.io.expert_hits;
  j["true_hit_rate"] =
      r.io.expert_requests ? static_cast<double>(r.io.expert_hits) / static_cast<double>(r.io.expert_requests) : 0.0;
  j["io_wait_seconds"] = r.io.io_wait_seconds;
  j["read_seconds"] = r.io.read_seconds;
  j["wall_seconds"] = r.wall_seconds;
  j["io_share"] = r.io_share;
  j["seconds_per_token"] = r.seconds_per_token;
  j["decode_forwards"] = r.decode_forwards;
  j["expert_failures"] = r.expert_failures;
  j["tokens_per_second"] = r.tokens_per_second;
  j["peak_rss_bytes"] = r.peak_rss;
  j["weight_bytes_read"] = r.weight_bytes_read;
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace k3
