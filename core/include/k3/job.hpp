// The main job of a pipeline: make sure the model exists (generating the synthetic demo
// checkpoint at the demo location of configs/default.yaml only; any other missing
// model.path is a UsageError naming it), load it through the pipeline's plugins, tokenise
// the prompt, generate, and write the trace, the state and the JSON report. A run stopped
// early (LoadHooks::stop) writes them too, with what it did. The CLI prints; this library
// code does not.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <k3/generate.hpp>
#include <k3/model.hpp>
#include <k3/pipeline.hpp>
#include <k3/plan.hpp>
#include <k3/runtime.hpp>

namespace k3 {

struct JobHooks : LoadHooks {
  /// The prompt as text and ids, before generation starts.
  std::function<void(const std::string& text, const std::vector<std::uint32_t>& ids)> on_prompt;
  /// Each generated token with the text that became complete with it (TextStream).
  std::function<void(std::uint32_t id, const std::string& text)> on_token;
  // LoadHooks::stop also stops generation: at the next token or prefill chunk, after which
  // the job still writes the trace, the state and the report of what was done
  // (JobReport::result.interrupted).
};

/// Storage traffic and cache outcome of one generated token (its forward pass).
struct StepIo {
  std::uint64_t expert_bytes = 0, trunk_bytes = 0, table_bytes = 0;
  std::uint64_t expert_requests = 0, expert_hits = 0;
  double io_wait_seconds = 0;
  /// True resident hit rate: requests served by an expert already in the cache (nothing is
  /// read speculatively, so every hit is a true one); 0 when there were no requests.
  [[nodiscard]] double hit_rate() const {
    return expert_requests ? static_cast<double>(expert_hits) / static_cast<double>(expert_requests) : 0.0;
  }
};

struct JobReport {
  std::string model;  ///< model.path: a folder or a URL, as the storage plugin reads it
  CheckpointIdentity identity;  ///< what the model's weights are (k3/checkpoint.hpp)
  /// The storage plugin's own counters (sdk::StorageCounters), when it has any: e.g. the
  /// tier's blocks served, and those dropped as damaged and fetched again.
  std::vector<std::pair<std::string, std::uint64_t>> storage_counters;
  std::string kernels, storage, mode;
  int threads = 0;
  std::string prompt_text;
  GenerateResult result;
  std::string generated_text;
  double load_seconds = 0;
  double tokens_per_second = 0;   ///< decode_forwards / decode seconds (prefill excluded)
  std::size_t decode_forwards = 0;  ///< generated tokens fed back (generated tokens - 1)
  SpeculativeSettings speculative;  ///< as configured (result.speculative: what it did)
  std::uint64_t peak_rss = 0;     ///< bytes, getrusage
  std::uint64_t weight_bytes_read = 0;
  std::filesystem::path trace_file;   ///< trace.out, when recorded (an interrupted run's too)
  std::filesystem::path state_file;   ///< job.save_state, when saved
  /// The ids the session holds unfed after the run (its last generated token, or the rest
  /// of an interrupted prefill): a run resumed from the saved state feeds them first.
  std::vector<std::uint32_t> pending;
  std::filesystem::path report_file;  ///< where the JSON went (empty if not written)
  // Streaming (docs/streaming.md "Report").
  MemoryPlan plan;
  std::string plan_text;              ///< the printed plan
  bool streaming = false;
  std::string cache_policy;
  std::size_t prefetch_depth = 0;  ///< cache.prefetch.depth of the run
  std::vector<StepIo> step_io;        ///< per generated token, same order as result.steps
  StreamStats io;                     ///< whole run, load included
  double wall_seconds = 0;            ///< load + prefill + decode
  double io_share = 0;                ///< compute thread waiting for storage ÷ wall clock
  double seconds_per_token = 0;       ///< decode seconds ÷ decode forward passes
  /// Non-empty: routed experts failed to load; the run finished but the ids are unsound (exit 4).
  std::vector<std::string> expert_failures;
};

/// The prompt of the pipeline's job: job.ids (checked against the vocabulary), else the text
/// of job.prompt_file, else job.prompt, encoded with the runtime's tokenizer. With
/// job.load_state only a value the user gave counts (set_by_user): configs/default.yaml's
/// demo prompt is not appended to a resumed conversation. UsageError for a bad id, an
/// unreadable file or text the tokenizer refuses.
struct JobPrompt {
  std::string text;                ///< as given, or the ids decoded
  std::vector<std::uint32_t> ids;
};
JobPrompt job_prompt(const Pipeline& pipeline, const Runtime& runtime);
/// The same in two steps: what the pipeline says, read before the model loads (the prompt
/// file too, so a wrong path fails at once), then checked and encoded with the runtime.
struct JobPromptSource {
  std::vector<std::string> ids;  ///< job.ids as written
  std::string text;              ///< job.prompt_file's text or job.prompt, when there are no ids
};
JobPromptSource read_job_prompt(const Pipeline& pipeline);
JobPrompt job_prompt(const JobPromptSource& source, const Runtime& runtime);

/// Token ids written as text ("5", "17"), each checked to be an id of a vocabulary of
/// `vocab`. UsageError "<where>: '<text>' is not a token id of this model (0 … vocab-1)".
std::vector<std::uint32_t> parse_token_ids(const std::vector<std::string>& items, std::int64_t vocab,
                                           std::string_view where);

/// Runs the job the pipeline describes. UsageError (exit 2) for anything wrong in the
/// pipeline, the checkpoint or the prompt, before any compute.
JobReport run_job(const Pipeline& pipeline, const JobHooks& hooks = {});
/// The same through `host` (its search path is the caller's; the pipeline's plugin_path
/// is not added). The run creates each of its plugin objects once through it.
JobReport run_job(const Pipeline& pipeline, PluginHost& host, const JobHooks& hooks = {});

/// The report as JSON (what --out / job.report writes).
std::string report_json(const JobReport& report);

}  // namespace k3
