#include <k3/job.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include <k3/checkpoint.hpp>
#include <k3/draft_model.hpp>
#include <k3/error.hpp>
#include <k3/log.hpp>
#include <k3/machine.hpp>
#include <k3/model.hpp>
#include <k3/runtime.hpp>
#include <k3/storage_extras.hpp>
#include <k3/trace.hpp>
#include <k3/user_files.hpp>

#include "streaming/cache_future.hpp"
#include "util/atomic_file.hpp"

namespace k3 {
namespace {

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

std::vector<std::uint32_t> parse_token_ids(const std::vector<std::string>& items, std::int64_t vocab,
                                           std::string_view where) {
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
      throw UsageError(std::string(where) + ": '" + s + "' is not a token id of this model (0 … " +
                       std::to_string(vocab - 1) + ")");
    ids.push_back(static_cast<std::uint32_t>(v));
  }
  return ids;
}

JobPromptSource read_job_prompt(const Pipeline& p) {
  // ids, a file, or text (first one set wins, in that order). A resumed conversation takes
  // only a prompt the user gave: configs/default.yaml's demo prompt is not appended to it,
  // so `--load-state FILE` alone continues where FILE stopped.
  JobPromptSource out;
  const bool resumed = !p.get_path("job.load_state").empty();
  const auto given = [&](std::string_view key) { return !resumed || set_by_user(p, key); };
  out.ids = given("job.ids") ? p.get_strings("job.ids") : std::vector<std::string>{};
  const std::filesystem::path prompt_file = given("job.prompt_file") ? p.get_path("job.prompt_file") : "";
  if (out.ids.empty() && !prompt_file.empty()) {
    const std::string what = p.where("job.prompt_file") + ": job.prompt_file";
    out.text = read_text_file(prompt_file, what, kMaxPromptFileBytes);
    out.file = what + ": " + prompt_file.string();
  } else if (out.ids.empty() && given("job.prompt")) {
    out.text = p.get_string("job.prompt");
  }
  return out;
}

JobPrompt job_prompt(const JobPromptSource& source, const Runtime& runtime) {
  JobPrompt out;
  if (!source.ids.empty()) {
    out.ids = parse_token_ids(source.ids, runtime.model().config().vocab_size, "job.ids");
  } else {
    out.text = source.text;
    try {
      out.ids = runtime.encode(out.text);
    } catch (const UsageError& e) {
      if (source.file.empty()) throw;
      throw UsageError(source.file + ": " + e.what());  // a binary file: say which
    }
  }
  if (out.text.empty() && !out.ids.empty()) out.text = runtime.decode(out.ids);
  return out;
}

JobPrompt job_prompt(const Pipeline& p, const Runtime& runtime) { return job_prompt(read_job_prompt(p), runtime); }

JobReport run_job(const Pipeline& p, const JobHooks& hooks) {
  PluginHost host(p.plugin_path());
  return run_job(p, host, hooks);
}

namespace {

/// What a run that failed part way knew (exit 1, or exit 5 outside generation): the
/// report is still written, with the reason, so a failure leaves the same record a finished
/// run does. Never throws: a report that cannot be written is logged, the run's own error wins.
void write_failure_report(JobReport& rep, const Runtime* runtime, const std::vector<std::uint32_t>& generated,
                          const std::string& why, ExitCode code, const JobHooks& hooks) noexcept {
  try {
    rep.failure = why;
    rep.exit_code = static_cast<int>(code);
    rep.result.interrupted = rep.result.interrupted || code == ExitCode::interrupted;
    if (rep.result.generated.empty()) rep.result.generated = generated;
    if (runtime != nullptr) {
      try {
        rep.generated_text = runtime->decode(rep.result.generated);
      } catch (const Error&) {
        // The ids are in the report; their text is a convenience.
      }
      rep.io = runtime->model().stream_stats();
      rep.expert_failures = rep.io.expert_failures;
      rep.weight_bytes_read = runtime->model().weight_bytes_read();
    }
    rep.peak_rss = peak_rss_bytes();
    write_file_atomically(rep.report_file, report_json(rep));
    if (hooks.on_report) hooks.on_report(rep.report_file);
  } catch (const std::exception& e) {
    log(LogLevel::warn, "", rep.report_file.string() + ": the report of the failed run was not written: " + e.what());
  }
}

/// run_job()'s work; fills `rep` as it goes, so that a failure still reports what was known.
void run_job_into(const Pipeline& p, PluginHost& host, const JobHooks& hooks, JobReport& rep,
                  std::unique_ptr<Runtime>& runtime_owner, std::vector<std::uint32_t>& generated);

}  // namespace

JobReport run_job(const Pipeline& p, PluginHost& host, const JobHooks& hooks) {
  JobReport rep;
  rep.report_file = p.get_path("job.report");
  const StopFlagScope stop_scope(host, hooks.stop);
  std::unique_ptr<Runtime> runtime;      // outlives the failure report, which reads its counters
  std::vector<std::uint32_t> generated;  // as handed out, for the report of a run that failed
  try {
    run_job_into(p, host, hooks, rep, runtime, generated);
  } catch (const Error& e) {
    // Exit 2 and 3 mean nothing ran (docs/architecture.md): no report of a run.
    if (e.code() != ExitCode::usage && e.code() != ExitCode::resource && !rep.report_file.empty())
      write_failure_report(rep, runtime.get(), generated, e.what(), e.code(), hooks);
    throw;
  } catch (const std::exception& e) {
    if (!rep.report_file.empty())
      write_failure_report(rep, runtime.get(), generated, std::string("internal error: ") + e.what(), ExitCode::runtime,
                           hooks);
    throw;
  }
  return rep;
}

namespace {

/// The loaded model's settings as the report names them (plan, streaming, cache, kernels).
/// Apart from run_job_into: a list of fields, not a step of the run.
void report_loaded_model(JobReport& rep, Runtime& runtime) {
  Model& model = runtime.model();
  const ModelSettings& ms = runtime.settings();
  rep.model = runtime.model_uri();
  rep.identity = model.identity();
  rep.load_seconds = runtime.load_seconds();
  rep.plan = model.plan();
  rep.plan_text = rep.plan.table();
  rep.streaming = model.streaming();
  rep.cache_policy = model.cache_policy();
  rep.prefetch_depth = ms.prefetch_depth;
  rep.kernels = model.kernel_set();
  rep.storage = model.storage_plugin();
  rep.threads = model.threads();
}

/// What the generation cost, once it has ended: its text, speed, memory, bytes read per
/// token (from the stream counters `marks` taken at each token) and the storage plugin's
/// counters. Apart from run_job_into: the report's arithmetic, not a step of the run.
void report_generation(JobReport& rep, Runtime& runtime, const GenerateSettings& g, std::vector<StreamStats>& marks,
                       std::chrono::steady_clock::time_point loaded) {
  Model& model = runtime.model();
  rep.generated_text = runtime.decode(rep.result.generated);
  // Decode speed counts the forward passes (decode_timing): N tokens cost N-1.
  const DecodeTiming decode = decode_timing(rep.result);
  rep.decode_forwards = decode.forwards;
  rep.speculative = g.speculative;
  rep.tokens_per_second = decode.tokens_per_second();
  rep.peak_rss = peak_rss_bytes();
  rep.weight_bytes_read = model.weight_bytes_read();
  rep.io = model.stream_stats();
  marks.push_back(rep.io);
  for (std::size_t i = 0; i + 1 < marks.size(); ++i) {
    const StreamStats &a = marks[i], &b = marks[i + 1];
    rep.step_io.push_back({b.expert_bytes - a.expert_bytes, b.trunk_bytes - a.trunk_bytes,
                           b.table_bytes - a.table_bytes, b.expert_requests - a.expert_requests,
                           b.expert_hits - a.expert_hits, b.io_wait_seconds - a.io_wait_seconds,
                           b.expert_wait_seconds - a.expert_wait_seconds});
  }
  rep.wall_seconds = rep.load_seconds +
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - loaded).count();
  rep.io_share = rep.wall_seconds > 0 ? rep.io.io_wait_seconds / rep.wall_seconds : 0;
  rep.seconds_per_token = decode.seconds_per_token();
  rep.expert_failures = rep.io.expert_failures;
  // The storage plugin's own counters (optional capability, docs/plugins.md).
  if (auto* counted = dynamic_cast<sdk::StorageCounters*>(model.storage().get()))
    if (const sdk::Status st = counted->counters(rep.storage_counters); !st.ok()) rep.storage_counters.clear();
}

/// After the generation: closes the trace, saves the state (marked unsound when an expert
/// was lost, not at all when the stop cut a pass short), sets the exit code and writes the
/// report. Apart from run_job_into: what a finished run leaves behind is one topic.
void finish_job(const Pipeline& p, const JobHooks& hooks, JobReport& rep, Session& session, TraceRecorder* trace,
                const std::filesystem::path& trace_file) {
  if (trace) {
    session.set_routing_listener(nullptr);
    trace->writer.close();
    rep.trace_file = trace_file;
  }
  rep.pending = session.pending();
  const std::filesystem::path save_state = p.get_path("job.save_state");
  if (!rep.result.cut.empty()) {
    // The stop cut a forward pass short: the session holds part of it, not a conversation.
    rep.failure = "interrupted during a storage wait: " + rep.result.cut;
    rep.pending.clear();
  }
  if (!save_state.empty() && rep.result.cut.empty()) {
    // A run that lost a routed expert carries a state that is not the model's: saved, but
    // marked, so that resuming it is refused instead of silently continuing another
    // conversation.
    std::string unsound;
    if (!rep.expert_failures.empty())
      unsound = std::to_string(rep.expert_failures.size()) +
                " routed expert read(s) failed in the run that saved it, first " + rep.expert_failures.front();
    session.save(save_state, unsound);
    rep.state_file = save_state;
  }
  if (!rep.expert_failures.empty()) {
    rep.failure = std::to_string(rep.expert_failures.size()) + " routed expert read(s) failed, first " +
                  rep.expert_failures.front() + "; their contributions were zero, so the generated ids are unsound";
    rep.exit_code = static_cast<int>(ExitCode::expert_failure);
  } else if (rep.result.interrupted) {
    rep.exit_code = static_cast<int>(ExitCode::interrupted);
  }
  if (!rep.report_file.empty()) {
    write_file_atomically(rep.report_file, report_json(rep));
    if (hooks.on_report) hooks.on_report(rep.report_file);
  }
}

void run_job_into(const Pipeline& p, PluginHost& host, const JobHooks& hooks, JobReport& rep,
                  std::unique_ptr<Runtime>& runtime_owner, std::vector<std::uint32_t>& generated) {
  // The prompt file is read before the model loads, so a wrong path fails in a moment.
  const JobPromptSource source = read_job_prompt(p);
  check_job_inputs(p);   // the other files it reads, and where it writes: before minutes of
  check_job_outputs(p);  // loading, not after the run
  rep.mode = p.get_string("job.mode");
  rep.model = p.get_path("model.path").string();
  const std::filesystem::path load_state = p.get_path("job.load_state");

  // The plugins first (a typo is reported at its line before any work), and their names in
  // the report even when loading fails.
  ModelPlugins plugins = create_pipeline_plugins(p, host);
  rep.storage = plugins.storage_name;
  runtime_owner = std::make_unique<Runtime>(p, host, std::move(plugins), hooks);
  Runtime& runtime = *runtime_owner;
  const auto loaded = std::chrono::steady_clock::now();
  Model& model = runtime.model();
  const ModelSettings& ms = runtime.settings();
  report_loaded_model(rep, runtime);

  GenerateSettings g = generate_settings_of(p, runtime);
  g.stop = hooks.stop;
  JobPrompt prompt = job_prompt(source, runtime);
  rep.prompt_text = std::move(prompt.text);
  g.prompt = std::move(prompt.ids);

  Session session(model, p.get_int("memory.context"));
  rep.context = session.max_positions();
  if (!load_state.empty()) session.load(load_state, p.get_bool("job.accept_unsound_state"));
  // A prompt the context cannot hold is a usage error before anything is shown or fed; a
  // long generation just stops at the context's end (StopReason::context_full).
  require_context_room(session, session.pending().size() + g.prompt.size());
  if (hooks.on_prompt) hooks.on_prompt(rep.prompt_text, g.prompt);
  // A trace's prompt hash covers what this run feeds first: a resumed conversation's
  // pending ids, then the prompt.
  std::vector<std::uint32_t> fed_first = session.pending();
  fed_first.insert(fed_first.end(), g.prompt.begin(), g.prompt.end());
  const std::uint64_t prompt_hash = trace_prompt_hash(fed_first);
  // cache.future must be a trace of this prompt (the model checked the rest).
  if (!ms.cache_future.empty())
    require_trace_of_run(ms.cache_future, read_trace_header(ms.cache_future),
                         streaming::trace_header_of(model.config(), model.identity().value, prompt_hash), true);

  // trace.out: every routed-expert request of this run, in request order (docs/cache.md).
  std::unique_ptr<TraceRecorder> trace;
  const std::filesystem::path trace_file = p.get_path("trace.out");
  if (!trace_file.empty()) {
    trace =
        std::make_unique<TraceRecorder>(trace_file, streaming::trace_header_of(model.config(), model.identity().value,
                                                                               prompt_hash));
    session.set_routing_listener(trace.get());
  }

  TextStream text(runtime);
  // Stream counters at each generated token: the forward pass of step s runs between the
  // callbacks of tokens s and s+1 (the last step runs none).
  std::vector<StreamStats> marks;
  rep.result = generate(session, g, [&](std::uint32_t id) {
    generated.push_back(id);
    marks.push_back(model.stream_stats());
    const std::string piece = text.push(id);
    if (hooks.on_token) hooks.on_token(id, piece);
  });
  if (hooks.on_token) {
    const std::string rest = text.flush();
    if (!rest.empty()) hooks.on_token(rep.result.generated.empty() ? 0 : rep.result.generated.back(), rest);
  }
  report_generation(rep, runtime, g, marks, loaded);
  finish_job(p, hooks, rep, session, trace.get(), trace_file);
}

}  // namespace

namespace {

/// The report's "steps": one entry per generated token, with what its forward pass read.
nlohmann::json steps_json(const JobReport& r) {
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
      step["expert_io_wait_seconds"] = io.expert_wait_seconds;
    }
    steps.push_back(step);
  }
  return steps;
}

/// The report's "plan": the memory plan the model was loaded with.
nlohmann::json plan_json(const JobReport& r) {
  const MemoryPlan& p = r.plan;
  return {{"total_bytes", p.total},
          {"available_bytes", p.available},
          {"streaming", r.streaming},
          {"budgets_for", p.budgets_for.empty() ? std::string("model") : p.budgets_for},
          {"trunk_budget_bytes", p.trunk_budget},
          {"expert_budget_bytes", p.expert_budget},
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
          {"speculative_bytes", p.speculative_bytes},
          {"router_copy_bits", p.router_copy_bits},
          {"router_copy_bytes", p.router_copy_bytes},
          {"buffer_bytes", p.buffer_bytes},
          {"overhead_bytes", p.overhead_bytes},
          {"text", r.plan_text}};
}

/// The report's "prefetch".
nlohmann::json prefetch_json(const JobReport& r) {
  // Router-lookahead prefetch: its reads are in bytes_read.experts; its hits are not in
  // expert_hits (docs/cache.md, "Router-lookahead prefetch").
  const auto ratio = [](std::uint64_t a, std::uint64_t b) {
    return b ? static_cast<double>(a) / static_cast<double>(b) : 0.0;
  };
  return {{"depth", r.prefetch_depth},
          {"experts", r.io.prefetch_experts},
          {"bytes", r.io.prefetch_bytes},
          {"used", r.io.prefetch_used},
          {"wasted_bytes", r.io.prefetch_wasted_bytes},
          {"hits", r.io.prefetch_hits},
          {"predicted", r.io.lookahead_predicted},
          {"routed", r.io.lookahead_routed},
          {"correct", r.io.lookahead_correct},
          {"recall", ratio(r.io.lookahead_correct, r.io.lookahead_routed)},
          {"precision", ratio(r.io.lookahead_correct, r.io.lookahead_predicted)}};
}

/// The report's decode reads per generated token and "speculative".
void add_decode_json(const JobReport& r, nlohmann::json& j) {
  // Decode reads per generated token (fed back): what speculative decoding cuts.
  StepIo sum;
  for (const StepIo& io : r.step_io) {
    sum.expert_bytes += io.expert_bytes;
    sum.trunk_bytes += io.trunk_bytes;
    sum.table_bytes += io.table_bytes;
  }
  const double fed = static_cast<double>(std::max<std::size_t>(1, r.decode_forwards));
  j["decode_bytes_per_token"] = {{"trunk", static_cast<double>(sum.trunk_bytes) / fed},
                                 {"experts", static_cast<double>(sum.expert_bytes) / fed},
                                 {"embedding_head", static_cast<double>(sum.table_bytes) / fed},
                                 {"total",
                                  static_cast<double>(sum.trunk_bytes + sum.expert_bytes + sum.table_bytes) / fed}};
  const SpeculativeStats& sp = r.result.speculative;
  j["speculative"] = {{"max_draft", r.speculative.max_draft},
                      {"ngram", r.speculative.ngram},
                      {"min_ngram", r.speculative.min_ngram},
                      {"forward_passes", sp.passes()},
                      {"verify_passes", sp.verify_passes},
                      {"drafts_proposed", sp.drafts_proposed},
                      {"drafts_accepted", sp.drafts_accepted},
                      {"tokens_per_pass",
                       sp.passes() ? static_cast<double>(r.decode_forwards) / static_cast<double>(sp.passes()) : 0.0}};
  if (const auto& dm = r.speculative.model)
    j["speculative"]["draft_model"] = {{"path", dm->model().uri()},
                                       {"resident_bytes", dm->resident_bytes()},
                                       {"min_p", r.speculative.draft_min_p},
                                       {"forward_tokens", dm->forward_tokens()}};
}

}  // namespace

std::string report_json(const JobReport& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["checkpoint"] = {{"identity", identity_hex(r.identity.value)},
                     {"shards", r.identity.shards},
                     {"sampled_bytes", r.identity.sampled_bytes},
                     {"seconds", r.identity.seconds}};
  j["kernels"] = r.kernels;
  j["storage"] = r.storage;
  j["threads"] = r.threads;
  {
    // What the OpenMP runtime read at load, and who chose it (k3/machine.hpp).
    const machine::OpenMpWaitPolicy omp = machine::openmp_wait_policy();
    j["openmp"] = {{"wait_policy", omp.effective()}, {"set_by", omp.set_by()}};
  }
  j["mode"] = r.mode;
  j["prompt_text"] = r.prompt_text;
  j["prompt_ids"] = r.result.prompt;
  j["generated_ids"] = r.result.generated;
  j["generated_text"] = r.generated_text;
  j["stopped_at_eos"] = r.result.stopped_at_eos;
  j["interrupted"] = r.result.interrupted;
  // How the run ended: the exit code the CLI gives it, and why when it is not 0 (a failure,
  // the lost experts of exit 4, a stop that cut a forward pass short); null when none.
  j["exit_code"] = r.exit_code;
  j["failure"] = r.failure.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.failure);
  j["stop_reason"] = stop_reason_name(r.result.stop_reason);
  j["context"] = r.context;
  j["resumed_pending_ids"] = r.result.pending;
  j["pending_ids"] = r.pending;
  if (!r.trace_file.empty()) j["trace"] = r.trace_file.string();
  if (!r.state_file.empty()) j["state"] = r.state_file.string();
  j["load_seconds"] = r.load_seconds;
  j["prefill_seconds"] = r.result.prefill_seconds;
  j["steps"] = steps_json(r);
  j["plan"] = plan_json(r);
  j["cache_policy"] = r.cache_policy;
  j["bytes_read"] = {{"trunk", r.io.trunk_bytes}, {"experts", r.io.expert_bytes}, {"embedding_head", r.io.table_bytes}};
  j["verify_seconds"] = r.io.verify_seconds;
  {
    nlohmann::json counters = nlohmann::json::object();
    for (const auto& [name, value] : r.storage_counters) counters[name] = value;
    j["storage_counters"] = std::move(counters);
  }
  j["expert_requests"] = r.io.expert_requests;
  j["expert_hits"] = r.io.expert_hits;
  j["true_hit_rate"] =
      r.io.expert_requests ? static_cast<double>(r.io.expert_hits) / static_cast<double>(r.io.expert_requests) : 0.0;
  j["prefetch"] = prefetch_json(r);
  j["io_wait_seconds"] = r.io.io_wait_seconds;
  j["expert_io_wait_seconds"] = r.io.expert_wait_seconds;
  j["read_seconds"] = r.io.read_seconds;
  j["wall_seconds"] = r.wall_seconds;
  j["io_share"] = r.io_share;
  j["seconds_per_token"] = r.seconds_per_token;
  j["decode_forwards"] = r.decode_forwards;
  add_decode_json(r, j);
  j["expert_failures"] = r.expert_failures;
  j["tokens_per_second"] = r.tokens_per_second;
  j["peak_rss_bytes"] = r.peak_rss;
  j["weight_bytes_read"] = r.weight_bytes_read;
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace k3
