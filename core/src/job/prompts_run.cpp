// `k3host --prompts` (k3/prompts.hpp): the prompts of a file through the step scheduler,
// serve.parallel at a time, each in a sequence slot of its own; results in input order.
#include <k3/prompts.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>

#include <nlohmann/json.hpp>

#include <k3/error.hpp>
#include <k3/machine.hpp>
#include <k3/scheduler.hpp>
#include <k3/user_files.hpp>

#include "util/atomic_file.hpp"

namespace k3 {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// The job keys of a run of one prompt, which a prompts file has no place for.
void refuse_single_run_keys(const Pipeline& p) {
  for (const char* key : {"job.load_state", "job.save_state", "job.dump_logits", "trace.out"})
    if (!p.get_path(key).empty())
      p.refuse(key, std::string("is for a run of one prompt; job.prompts (") + p.where("job.prompts") +
                        ") runs many: leave it unset");
  if (p.get_string("job.mode") != "incremental")
    p.refuse("job.mode", "job.prompts runs incremental decoding only (recompute is a check of one run)");
}

/// The generation settings of one prompt: the pipeline's, with the line's own over them.
GenerateSettings settings_of(const GenerateSettings& base, const PromptEntry& e, std::vector<std::uint32_t> ids) {
  GenerateSettings g = base;
  g.prompt = std::move(ids);
  if (e.max_tokens) g.max_new_tokens = *e.max_tokens;
  if (e.temperature) g.sampling.temperature = *e.temperature;
  if (e.top_k) g.sampling.top_k = *e.top_k;
  if (e.top_p) g.sampling.top_p = *e.top_p;
  if (e.min_p) g.sampling.min_p = *e.min_p;
  if (e.repeat_penalty) g.sampling.repeat_penalty = *e.repeat_penalty;
  if (e.repeat_last_n) g.sampling.repeat_last_n = *e.repeat_last_n;
  if (e.seed) g.sampling.seed = *e.seed;
  return g;
}

StreamStats minus(const StreamStats& b, const StreamStats& a) {
  StreamStats d = b;
  d.trunk_bytes -= a.trunk_bytes;
  d.expert_bytes -= a.expert_bytes;
  d.table_bytes -= a.table_bytes;
  d.expert_requests -= a.expert_requests;
  d.expert_hits -= a.expert_hits;
  d.io_wait_seconds -= a.io_wait_seconds;
  d.expert_wait_seconds -= a.expert_wait_seconds;
  d.read_seconds -= a.read_seconds;
  return d;
}

/// One prompt in flight: its slot and its sequence.
struct Running {
  std::size_t index = 0;
  std::size_t slot = 0;
  std::unique_ptr<Sequence> sequence;
};

/// The batch itself: prompts join as slots free up, in file order; results leave in file
/// order.
class PromptBatch {
 public:
  PromptBatch(Runtime& runtime, const GenerateSettings& base, std::vector<GenerateSettings> settings,
              PromptsReport& rep, const PromptsHooks& hooks)
      : runtime_(runtime), base_(base), settings_(std::move(settings)), rep_(rep), hooks_(hooks) {}

  void run() {
    Model& model = runtime_.model();
    const MemoryPlan& plan = model.plan();
    const std::size_t n = std::max<std::size_t>(1, plan.parallel);
    SchedulerSettings ss;
    ss.parallel = n;
    ss.prefill_budget = static_cast<std::size_t>(plan.prefill_budget);
    ss.context = rep_.context;
    ss.max_draft = static_cast<std::size_t>(std::max<std::int64_t>(0, base_.speculative.max_draft));
    StepScheduler scheduler(model, ss);
    for (std::size_t i = 0; i < n; ++i) sessions_.push_back(std::make_unique<Session>(model, rep_.context));
    free_.assign(n, true);
    rep_.steps_by_size.assign(n + 1, 0);
    start_ = Clock::now();
    const StreamStats before = model.stream_stats();
    std::vector<Running> running;
    running.reserve(n);
    for (;;) {
      admit(scheduler, running);
      if (running.empty()) break;
      scheduler.step();
      const StepStats& st = scheduler.last();
      if (st.sequences != 0) {
        ++rep_.steps;
        rep_.step_sequences += st.sequences;
        rep_.step_rows += st.rows;
        ++rep_.steps_by_size[std::min(st.sequences, n)];
        rep_.most_in_flight = std::max(rep_.most_in_flight, st.in_flight);
      }
      for (auto it = running.begin(); it != running.end();) {
        if (it->sequence->done()) {
          finish(*it);
          it = running.erase(it);
        } else {
          ++it;
        }
      }
      emit_ready();
    }
    rep_.batch_seconds = seconds_between(start_, Clock::now());
    rep_.io = minus(model.stream_stats(), before);
    emit_ready();
  }

 private:
  bool stopping() const { return base_.stop != nullptr && base_.stop->load(); }

  /// Prompts join while slots are free, in order; none after a stop request.
  void admit(StepScheduler& scheduler, std::vector<Running>& running) {
    while (next_ < settings_.size() && !stopping()) {
      const auto slot = std::find(free_.begin(), free_.end(), true);
      if (slot == free_.end()) return;
      const auto s = static_cast<std::size_t>(slot - free_.begin());
      Session& session = *sessions_[s];
      session.reset();
      const auto joined = Clock::now();
      PromptResult& out = rep_.prompts[next_];
      out.started = true;
      out.queue_seconds = seconds_between(start_, joined);
      running.push_back({next_, s, nullptr});
      Running& run = running.back();
      run.sequence = std::make_unique<Sequence>(session, settings_[next_],
                                                [this, &out, idx = next_](std::uint32_t) { token(idx, out); });
      ++next_;
      *slot = false;
      scheduler.add(*run.sequence);
      clocks_.push_back({run.index, joined, joined, false});
    }
  }

  struct Clocks {
    std::size_t index;
    Clock::time_point joined, last;
    bool first;
  };

  void token(std::size_t index, PromptResult& out) {
    const auto now = Clock::now();
    for (Clocks& c : clocks_)
      if (c.index == index) {
        if (!c.first) {
          c.first = true;
          out.first_token_seconds = seconds_between(c.joined, now);
        } else {
          out.token_gaps.push_back(seconds_between(c.last, now));
        }
        c.last = now;
        return;
      }
  }

  void finish(Running& r) {
    PromptResult& out = rep_.prompts[r.index];
    out.result = r.sequence->result();
    if (r.sequence->failure()) {
      try {
        std::rethrow_exception(r.sequence->failure());
      } catch (const std::exception& e) {
        out.error = e.what();
      }
    }
    try {
      out.text = runtime_.decode(out.result.generated);
    } catch (const Error& e) {
      if (out.error.empty()) out.error = e.what();
    }
    rep_.generated += out.result.generated.size();
    free_[r.slot] = true;
    std::erase_if(clocks_, [&](const Clocks& c) { return c.index == r.index; });
    done_.push_back(r.index);
  }

  /// Hands out the results whose prompts, and every one before them, are done.
  void emit_ready() {
    for (;;) {
      const auto it = std::find(done_.begin(), done_.end(), emitted_);
      const bool skipped = emitted_ < settings_.size() && emitted_ >= next_ && stopping_done();
      if (it == done_.end() && !skipped) return;
      if (it != done_.end()) done_.erase(it);
      const PromptResult& r = rep_.prompts[emitted_];
      if (hooks_.on_result) hooks_.on_result(r, result_line(r));
      ++emitted_;
      if (emitted_ == settings_.size()) return;
    }
  }

  /// After a stop request, once nothing runs, the prompts that never started are handed out too.
  [[nodiscard]] bool stopping_done() const { return stopping() && clocks_.empty(); }

  Runtime& runtime_;
  const GenerateSettings& base_;
  std::vector<GenerateSettings> settings_;
  PromptsReport& rep_;
  const PromptsHooks& hooks_;
  std::vector<std::unique_ptr<Session>> sessions_;
  std::vector<bool> free_;
  std::vector<Clocks> clocks_;
  std::vector<std::size_t> done_;
  std::size_t next_ = 0, emitted_ = 0;
  Clock::time_point start_;
};

}  // namespace

Spread spread_of(std::vector<double> seconds) {
  Spread s;
  s.count = seconds.size();
  if (seconds.empty()) return s;
  std::sort(seconds.begin(), seconds.end());
  const auto rank = [&](double q) {
    const auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(seconds.size())));
    return seconds[std::min(seconds.size(), std::max<std::size_t>(1, k)) - 1];
  };
  s.p50 = rank(0.5);
  s.p99 = rank(0.99);
  double sum = 0;
  for (const double v : seconds) sum += v;
  s.mean = sum / static_cast<double>(seconds.size());
  return s;
}

std::string result_line(const PromptResult& r) {
  nlohmann::ordered_json j;
  j["index"] = r.index;
  j["line"] = r.line;
  j["prompt_tokens"] = r.prompt_ids.size();
  j["ids"] = r.result.generated;
  j["text"] = r.text;
  j["finish_reason"] = r.started ? stop_reason_name(r.result.stop_reason) : "interrupted";
  if (!r.error.empty()) j["error"] = r.error;
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

PromptsReport run_prompts(const Pipeline& p, PluginHost& host, const PromptsHooks& hooks) {
  PromptsReport rep;
  rep.prompts_file = p.get_path("job.prompts");
  rep.results_file = p.get_path("job.results");
  rep.report_file = p.get_path("job.report");
  if (rep.prompts_file.empty()) p.refuse("job.prompts", "is empty: name a file of prompts");
  refuse_single_run_keys(p);
  // Every prompt is read and checked before minutes of loading; so are the outputs.
  const std::vector<PromptEntry> entries = read_prompts(rep.prompts_file, p.where("job.prompts") + ": job.prompts");
  check_job_inputs(p);
  check_job_outputs(p);  // job.results among them

  Runtime runtime(p, host, hooks, RunSequences::batched);
  Model& model = runtime.model();
  rep.model = runtime.model_uri();
  rep.kernels = model.kernel_set();
  rep.storage = runtime.settings().storage;
  rep.threads = model.threads();
  rep.context = runtime.settings().memory.context;
  rep.plan = model.plan();
  rep.parallel = std::max<std::size_t>(1, rep.plan.parallel);
  rep.prefill_budget = static_cast<std::size_t>(rep.plan.prefill_budget);
  rep.load_seconds = runtime.load_seconds();

  GenerateSettings base = generate_settings_of(p, runtime);
  base.stop = hooks.stop;
  std::vector<GenerateSettings> settings;
  settings.reserve(entries.size());
  rep.prompts.resize(entries.size());
  const auto vocab = model.config().vocab_size;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const PromptEntry& e = entries[i];
    const std::string at = p.where("job.prompts") + ": job.prompts: " + rep.prompts_file.string() + ":" +
                           std::to_string(e.line) + ": ";
    std::vector<std::uint32_t> ids;
    if (e.has_ids) {
      for (const std::int64_t id : e.ids) {
        if (id >= vocab)
          throw UsageError(at + "token id " + std::to_string(id) + " is outside the vocabulary of " +
                           std::to_string(vocab) + " ids");
        ids.push_back(static_cast<std::uint32_t>(id));
      }
    } else {
      try {
        ids = runtime.encode(e.text);
      } catch (const UsageError& err) {
        throw UsageError(at + err.what());
      }
    }
    if (ids.empty()) throw UsageError(at + "the prompt encodes to no tokens");
    if (static_cast<std::int64_t>(ids.size()) > rep.context)
      throw UsageError(at + "the prompt is " + std::to_string(ids.size()) + " tokens, more than memory.context " +
                       std::to_string(rep.context) + " (raise it: -c/--context N)");
    rep.prompts[i].index = i;
    rep.prompts[i].line = e.line;
    rep.prompts[i].prompt_ids = ids;
    settings.push_back(settings_of(base, e, std::move(ids)));
  }

  PromptBatch(runtime, base, std::move(settings), rep, hooks).run();

  std::vector<double> waits, firsts, gaps;
  for (const PromptResult& r : rep.prompts) {
    if (!r.started) {
      rep.interrupted = true;
      continue;
    }
    rep.interrupted = rep.interrupted || r.result.interrupted;
    waits.push_back(r.queue_seconds);
    if (!r.result.generated.empty()) firsts.push_back(r.first_token_seconds);
    gaps.insert(gaps.end(), r.token_gaps.begin(), r.token_gaps.end());
    if (!r.error.empty() && rep.failure.empty())
      rep.failure = "prompt on line " + std::to_string(r.line) + ": " + r.error;
  }
  rep.queue_wait = spread_of(std::move(waits));
  rep.first_token = spread_of(std::move(firsts));
  rep.token_gap = spread_of(std::move(gaps));
  rep.peak_rss = peak_rss_bytes();
  rep.expert_failures = model.stream_stats().expert_failures;
  if (!rep.failure.empty())
    rep.exit_code = static_cast<int>(ExitCode::runtime);
  else if (!rep.expert_failures.empty())
    rep.exit_code = static_cast<int>(ExitCode::expert_failure);
  else if (rep.interrupted)
    rep.exit_code = static_cast<int>(ExitCode::interrupted);
  if (!rep.results_file.empty()) {
    std::string all;
    for (const PromptResult& r : rep.prompts) all += result_line(r) + "\n";
    write_file_atomically(rep.results_file, all);
  }
  if (!rep.report_file.empty()) write_file_atomically(rep.report_file, prompts_report_json(rep));
  return rep;
}

std::string prompts_report_json(const PromptsReport& r) {
  json j;
  j["model"] = r.model;
  j["kernels"] = r.kernels;
  j["storage"] = r.storage;
  j["threads"] = r.threads;
  j["context"] = r.context;
  j["prompts_file"] = r.prompts_file.string();
  if (!r.results_file.empty()) j["results_file"] = r.results_file.string();
  j["parallel"] = r.parallel;
  j["prefill_budget"] = r.prefill_budget;
  j["exit_code"] = r.exit_code;
  j["failure"] = r.failure.empty() ? json(nullptr) : json(r.failure);
  j["interrupted"] = r.interrupted;
  j["load_seconds"] = r.load_seconds;
  j["batch_seconds"] = r.batch_seconds;
  j["generated_tokens"] = r.generated;
  j["tokens_per_second"] = r.tokens_per_second();
  j["bytes_read"] = {{"trunk", r.io.trunk_bytes}, {"experts", r.io.expert_bytes}, {"embedding_head", r.io.table_bytes}};
  j["bytes_per_generated_token"] = r.bytes_per_token();
  j["steps"] = {{"count", r.steps},
                {"tokens", r.step_rows},
                {"mean_sequences",
                 r.steps ? static_cast<double>(r.step_sequences) / static_cast<double>(r.steps) : 0.0},
                {"by_sequences", r.steps_by_size},
                {"most_in_flight", r.most_in_flight}};
  const auto spread = [](const Spread& s) {
    return json{{"count", s.count}, {"p50", s.p50}, {"p99", s.p99}, {"mean", s.mean}};
  };
  j["queue_wait_seconds"] = spread(r.queue_wait);
  j["first_token_seconds"] = spread(r.first_token);
  j["inter_token_seconds"] = spread(r.token_gap);
  json prompts = json::array();
  for (const PromptResult& p : r.prompts) {
    json e = json::parse(result_line(p));
    e["queue_seconds"] = p.queue_seconds;
    e["first_token_seconds"] = p.first_token_seconds;
    e["prefill_seconds"] = p.result.prefill_seconds;
    e["speculative"] = {{"verify_passes", p.result.speculative.verify_passes},
                        {"drafts_proposed", p.result.speculative.drafts_proposed},
                        {"drafts_accepted", p.result.speculative.drafts_accepted}};
    prompts.push_back(std::move(e));
  }
  j["prompts"] = std::move(prompts);
  j["plan"] = {{"total_bytes", r.plan.total},     {"available_bytes", r.plan.available},
               {"sequences", r.plan.parallel},    {"sequence_bytes", r.plan.sequence_bytes},
               {"step_tokens", r.plan.step_rows}, {"text", r.plan.table()}};
  j["expert_failures"] = r.expert_failures;
  j["peak_rss_bytes"] = r.peak_rss;
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace k3
