// BenchRunner: one pipeline loaded once, its prompt run again and again from an empty
// conversation (or as several streams decoded together), each run measured from the
// model's stream counters (k3/bench.hpp).
#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include <k3/bench.hpp>
#include <k3/error.hpp>
#include <k3/job.hpp>
#include <k3/model.hpp>
#include <k3/scheduler.hpp>

namespace k3 {
namespace {

BenchIo io_between(const StreamStats& a, const StreamStats& b) {
  BenchIo io;
  io.expert_bytes = b.expert_bytes - a.expert_bytes;
  io.trunk_bytes = b.trunk_bytes - a.trunk_bytes;
  io.table_bytes = b.table_bytes - a.table_bytes;
  io.expert_requests = b.expert_requests - a.expert_requests;
  io.expert_hits = b.expert_hits - a.expert_hits;
  io.prefetch_hits = b.prefetch_hits - a.prefetch_hits;
  io.io_wait_seconds = b.io_wait_seconds - a.io_wait_seconds;
  io.expert_wait_seconds = b.expert_wait_seconds - a.expert_wait_seconds;
  return io;
}

/// A key the bench does not honour, refused at its place in the pipeline.
void refuse_if_set(const Pipeline& p, std::string_view key, const char* why) {
  if (!p.get_path(key).empty()) p.refuse(key, std::string("k3host bench does not use it: ") + why);
}

}  // namespace

struct BenchRunner::Impl {
  PluginHost host;
  Runtime runtime;
  GenerateSettings settings;  ///< the job's sampling and mode; the bench's prompt, EOS off
  Session session;
  BenchInfo info;
  std::vector<std::unique_ptr<Session>> streams;  ///< several streams: one session each

  Impl(const Pipeline& p, const LoadHooks& hooks, std::size_t n)
      : host(p.plugin_path()),
        runtime(p, host, hooks, n > 1 ? RunSequences::batched : RunSequences::one),
        session(runtime.model(), p.get_int("memory.context")) {}

  BenchSample pass(std::int64_t tokens, const std::string& what, const BenchProgress& progress) {
    if (info.streams > 1) return pass_streams(tokens, what, progress);
    Model& model = runtime.model();
    session.reset();
    GenerateSettings g = settings;
    g.max_new_tokens = tokens;
    const StreamStats before = model.stream_stats();
    StreamStats first;
    bool have_first = false;
    std::size_t done = 0;
    const auto total = static_cast<std::size_t>(tokens);
    if (progress) progress(what, 0, total);
    const GenerateResult r = generate(session, g, [&](std::uint32_t) {
      // The first token's callback is where the prefill ends and the decode begins.
      if (!have_first) {
        first = model.stream_stats();
        have_first = true;
      }
      if (progress) progress(what, ++done, total);
    });
    const StreamStats end = model.stream_stats();
    if (!have_first) first = end;  // stopped inside the prefill
    BenchSample s;
    s.prompt_tokens = r.pending.size() + r.prompt.size();
    s.generated = r.generated;
    s.prefill_seconds = r.prefill_seconds;
    s.decode = decode_timing(r);
    s.prefill_io = io_between(before, first);
    s.decode_io = io_between(first, end);
    s.peak_rss = peak_rss_bytes();
    s.interrupted = r.interrupted;
    s.expert_failures.assign(end.expert_failures.begin() + static_cast<std::ptrdiff_t>(before.expert_failures.size()),
                             end.expert_failures.end());
    return s;
  }

  /// The prompt as info.streams streams decoded together, stream i with seed + i.
  BenchSample pass_streams(std::int64_t tokens, const std::string& what, const BenchProgress& progress) {
    using Clock = std::chrono::steady_clock;
    Model& model = runtime.model();
    const std::size_t n = info.streams;
    std::vector<Session*> sessions{&session};
    for (const auto& s : streams) sessions.push_back(s.get());
    std::vector<std::unique_ptr<Sequence>> seqs;
    std::vector<std::size_t> counts(n, 0);  // tokens per stream so far
    std::size_t started = 0, done = 0;
    const auto total = static_cast<std::size_t>(tokens);
    const StreamStats before = model.stream_stats();
    StreamStats first;
    Clock::time_point t_first{};
    std::vector<std::size_t> at_first;  // tokens per stream when the last one had its first
    const auto t0 = Clock::now();
    if (progress) progress(what, 0, total);
    for (std::size_t i = 0; i < n; ++i) {
      sessions[i]->reset();
      GenerateSettings g = settings;
      g.max_new_tokens = tokens;
      g.sampling.seed = settings.sampling.seed + i;
      seqs.push_back(std::make_unique<Sequence>(*sessions[i], g, [&, i](std::uint32_t) {
        if (counts[i]++ == 0 && ++started == n) {
          // Every stream is decoding from here: the prefill is over.
          first = model.stream_stats();
          t_first = Clock::now();
          at_first = counts;
        }
        if (i == 0 && progress) progress(what, ++done, total);
      }));
    }
    SchedulerSettings ss;
    ss.parallel = n;
    ss.prefill_budget = static_cast<std::size_t>(model.plan().prefill_budget);
    ss.context = session.max_positions();
    ss.max_draft = static_cast<std::size_t>(std::max<std::int64_t>(0, settings.speculative.max_draft));
    StepScheduler scheduler(model, ss);
    for (const auto& q : seqs) scheduler.add(*q);
    while (scheduler.step()) {
    }
    const StreamStats end = model.stream_stats();
    const auto t_end = Clock::now();
    if (started < n) {  // stopped inside the prefill
      first = end;
      t_first = t_end;
      at_first = counts;
    }
    BenchSample s;
    for (std::size_t i = 0; i < n; ++i) {
      if (seqs[i]->failure()) std::rethrow_exception(seqs[i]->failure());
      const GenerateResult& r = seqs[i]->result();
      s.prompt_tokens += r.pending.size() + r.prompt.size();
      s.generated.insert(s.generated.end(), r.generated.begin(), r.generated.end());
      s.interrupted = s.interrupted || r.interrupted;
      s.decode.forwards += counts[i] - at_first[i];
    }
    s.prefill_seconds = std::chrono::duration<double>(t_first - t0).count();
    s.decode.seconds = std::chrono::duration<double>(t_end - t_first).count();
    s.prefill_io = io_between(before, first);
    s.decode_io = io_between(first, end);
    s.peak_rss = peak_rss_bytes();
    s.expert_failures.assign(end.expert_failures.begin() + static_cast<std::ptrdiff_t>(before.expert_failures.size()),
                             end.expert_failures.end());
    return s;
  }
};

BenchRunner::BenchRunner(const Pipeline& p, const BenchSettings& settings, const LoadHooks& hooks) {
  // Checked before the model loads: a bench of such a pipeline would not be the job's.
  refuse_if_set(p, "job.load_state", "every repetition starts from an empty conversation");
  refuse_if_set(p, "cache.future", "a trace describes one run, not the repetitions after it");
  const std::size_t streams = std::max<std::size_t>(1, settings.streams);
  if (streams > 1 && p.get_string("job.mode") != "incremental")
    p.refuse("job.mode", "streams decoded together (bench --parallel) decode incrementally");
  impl_ = std::make_unique<Impl>(p, hooks, streams);
  if (streams > 1 && impl_->runtime.model().plan().parallel < streams)
    throw UsageError("bench: " + std::to_string(streams) + " streams, but the plan holds " +
                     std::to_string(impl_->runtime.model().plan().parallel) + " sequences (serve.parallel from " +
                     p.where("serve.parallel") + ")");
  Runtime& runtime = impl_->runtime;
  const Model& model = runtime.model();
  BenchInfo& info = impl_->info;

  if (!settings.prompt_ids.empty()) {
    info.prompt_ids = parse_token_ids(settings.prompt_ids, model.config().vocab_size, "the bench's prompt ids");
    info.prompt_text = runtime.decode(info.prompt_ids);
  } else if (settings.prompt_text) {
    info.prompt_text = *settings.prompt_text;
    info.prompt_ids = runtime.encode(info.prompt_text);
  } else {
    JobPrompt prompt = job_prompt(p, runtime);
    info.prompt_text = std::move(prompt.text);
    info.prompt_ids = std::move(prompt.ids);
  }
  if (info.prompt_ids.empty())
    throw UsageError("bench: the prompt is empty (job.prompt, job.prompt_file or job.ids of " + p.file().string() +
                     ", or the bench's own prompt)");

  info.new_tokens = settings.new_tokens > 0 ? settings.new_tokens : p.get_int("job.max_new_tokens");
  if (info.new_tokens < 2)
    throw UsageError("bench: " + std::to_string(info.new_tokens) +
                     " new token(s) per repetition (job.max_new_tokens from " + p.where("job.max_new_tokens") +
                     "): a repetition needs at least 2, so that there is a decode forward pass to time");
  info.warmup_tokens = settings.warmup_tokens < 0 ? info.new_tokens : settings.warmup_tokens;
  info.streams = streams;
  for (std::size_t i = 1; i < streams; ++i)
    impl_->streams.push_back(std::make_unique<Session>(runtime.model(), p.get_int("memory.context")));
  info.context = p.get_int("memory.context");
  // generate() feeds the prompt and all but the last generated token.
  const std::int64_t longest = static_cast<std::int64_t>(info.prompt_ids.size()) +
                               std::max(info.new_tokens, info.warmup_tokens) - 1;
  if (longest > info.context)
    throw UsageError("bench: the prompt (" + std::to_string(info.prompt_ids.size()) + " tokens) and " +
                     std::to_string(std::max(info.new_tokens, info.warmup_tokens)) +
                     " new tokens do not fit in memory.context = " + std::to_string(info.context) + " (from " +
                     p.where("memory.context") + ")");

  GenerateSettings& g = impl_->settings;
  g = generate_settings_of(p, runtime);
  g.prompt = info.prompt_ids;
  g.stop_at_eos = false;  // every repetition generates the same number of tokens
  g.stop_tokens.clear();
  g.dump_logits.clear();
  g.stop = hooks.stop;

  info.model = runtime.model_uri();
  info.kernels = model.kernel_set();
  info.storage = runtime.model().storage_plugin();
  info.cache_policy = runtime.model().cache_policy();
  info.mode = p.get_string("job.mode");
  info.threads = model.threads();
  info.streaming = model.streaming();
  info.plan_bytes = model.plan().total;
  info.load_seconds = runtime.load_seconds();
}

BenchRunner::~BenchRunner() = default;

const BenchInfo& BenchRunner::info() const noexcept { return impl_->info; }

void BenchRunner::warm_up(const std::string& what, const BenchProgress& progress) {
  BenchInfo& info = impl_->info;
  if (info.warmup_tokens == 0) return;
  const auto t0 = std::chrono::steady_clock::now();
  const BenchSample s = impl_->pass(info.warmup_tokens, what, progress);
  info.warmup_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  info.warmup_expert_failures = s.expert_failures;
}

BenchSample BenchRunner::run(const std::string& what, const BenchProgress& progress) {
  return impl_->pass(impl_->info.new_tokens, what, progress);
}

}  // namespace k3
